"""Storage roots (a local folder or gs://bucket/prefix) and the study layout in them."""
