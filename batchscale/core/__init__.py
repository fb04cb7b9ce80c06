"""The leaf layer: spec types, shared names, goals and errors. Imports nothing of the project."""
