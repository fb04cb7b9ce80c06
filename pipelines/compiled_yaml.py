"""Reading a compiled pipeline's YAML (40-75 KB): compile's integer defaults, the pipeline's
size and upload's comparison with a stored version all read it with ``load_documents``.

It loads with libyaml's C loader where PyYAML was built with it, the pure-Python one
otherwise; the documents are those ``yaml.safe_load_all`` gives (the same safe
constructors), in a tenth of the time: the pure-Python loader took about a third of each
compile. Writing stays with the pure-Python dumper (``compiled_defaults``): libyaml's folds
long strings at other points, and the compiled bytes stay as before.
"""

from __future__ import annotations

import yaml

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_documents(source) -> list:
    """Every document of ``source`` (YAML text or an open file), as ``yaml.safe_load_all``."""
    return list(yaml.load_all(source, Loader=LOADER))
