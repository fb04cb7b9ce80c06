"""Integers stay integers in a compiled pipeline's default study spec.

KFP carries a dict parameter's default as a protobuf Struct, whose numbers are all
float64, so the compiled YAML (and the Kubeflow UI that shows it for editing) reads
``batch_sizes: [8.0, 16.0, ...]`` and ``trials_per_batch_size: 10.0``. The values are the
same to ``parse_spec``, but a user editing the default in the UI sees floats where the
spec means integers. ``keep_integer_defaults`` writes the spec's own dict (``to_dict``,
integers intact) back into the compiled file: the root's ``study_spec`` default and the
header comment that lists the inputs; every other byte of meaning is kept (the YAML is
loaded and dumped again, the header comment kept).
"""

from __future__ import annotations

import yaml

from batchscale.pipelines.compiled_yaml import load_documents

PARAMETER = "study_spec"


def keep_integer_defaults(path: str, default: dict, parameter: str = PARAMETER) -> None:
    """Rewrite ``path`` (a compiled pipeline) with ``default`` as ``parameter``'s default."""
    with open(path) as fh:
        text = fh.read()
    lines = text.splitlines()
    header = []
    while lines and lines[0].startswith("#"):
        line = lines.pop(0)
        if line.lstrip("# ").startswith(f"{parameter}: dict [Default:"):
            line = f"#    {parameter}: dict [Default: {default!r}]"
        header.append(line)
    docs = load_documents("\n".join(lines))
    docs[0]["root"]["inputDefinitions"]["parameters"][parameter]["defaultValue"] = default
    body = "---\n".join(yaml.safe_dump(doc, sort_keys=False, width=1000) for doc in docs)
    with open(path, "w") as fh:
        fh.write("\n".join(header) + "\n" + body)
