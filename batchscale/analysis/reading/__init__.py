"""Reading a study: the first room of ``batchscale.analysis``.

What the store (ours, or the paper's released database) says, read once: the study reader
(``study_reader``), its files and what was damaged (``study_files``), the trials the spec
expects that are not finished (``completeness``), what the stopping protocol recorded and
leaves unknown (``censoring``) and how the report names where it read from
(``locations``). Imports no other room.
"""
