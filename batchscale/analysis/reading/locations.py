"""Where a study lives, as its report may name it: never the local path of this machine.

A report travels (a bucket, the Kubeflow UI, an e-mail), and the folder a local study was
read from says nothing to its reader while it gives away a user name and the machine's
layout. So the report names a local study relative to its store root: one of our studies
as ``quickstart/mnist_5k/fc_128_128/nesterov_momentum`` (its store holds ``quickstart/``),
a folder of the paper's database as ``fashion_mnist/simple_cnn_base/momentum``; a ``gs://``
study keeps its URL, which is where a reader finds it. ``private_root`` is the local
folder to leave out, ``without_root`` takes it out of a text (the report's HTML, Markdown
and summary.json are passed through it whole, so no file named in a note or a damaged-file
line can bring it back).
"""

from __future__ import annotations

import html
import re


def private_root(study) -> str | None:
    """The local folder above the study that the report must not name: our study's store
    root, or the folder holding the paper-layout workload's ``dataset/model/optimizer``;
    None for a remote (``gs://``) study or a store at ``/``."""
    location = str(study.location).rstrip("/")
    if "://" in location:
        return None
    spec = getattr(study, "spec", None)
    if spec is not None and "://" not in str(spec.store):
        root = str(spec.store).rstrip("/")
    else:
        root = location.rsplit("/", 3)[0] if location.count("/") >= 3 else ""
    return root or None


def without_root(text: str, root: str | None) -> str:
    """``text`` with ``root/`` taken out of every path (and ``root`` alone written ``.``),
    in plain and in HTML-escaped form."""
    if not root:
        return text
    for form in dict.fromkeys((root, html.escape(root))):
        text = re.sub(re.escape(form) + "/", "", text)
        text = re.sub(re.escape(form) + r"(?![\w/-]|\.\w)", ".", text)  # not a longer name
    return text


def shown_location(study) -> str:
    """The study's location as the report names it (module docstring)."""
    return without_root(str(study.location), private_root(study))
