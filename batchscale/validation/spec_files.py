"""Where a study spec comes from: a YAML file, a shipped study by name, or the KFP parameter.

Every path ends in ``parse_spec``, the one door from a raw dict to a ``StudySpec``.
"""

from __future__ import annotations

from importlib import resources

from batchscale.core.spec import SpecError, StudySpec, fail_field
from batchscale.validation.study_spec import parse_spec


def shipped_studies() -> list[str]:
    """Names of the example specs shipped inside the package (batchscale/studies/*.yaml)."""
    return sorted(p.name[:-5] for p in resources.files("batchscale.studies").iterdir()
                  if p.name.endswith(".yaml"))


def shipped_experiments() -> list[str]:
    """Names of the experiments shipped inside the package (batchscale/experiments/*.yaml)."""
    return sorted(p.name[:-5] for p in resources.files("batchscale.experiments").iterdir()
                  if p.name.endswith(".yaml"))


def default_spec_dict(name: str = "quickstart") -> dict:
    """A shipped spec by name (a study, or an experiment); quickstart (the embedded default
    study) unless told."""
    package = "batchscale.experiments" if name in shipped_experiments() else "batchscale.studies"
    text = resources.files(package).joinpath(f"{name}.yaml").read_text()
    return load_yaml(text, f"{name}.yaml")


def _shipped_text() -> str:
    return f"shipped studies: {', '.join(shipped_studies())}; experiments: {', '.join(shipped_experiments())}"


def load_yaml(text: str, where: str):
    """YAML as safe_load reads it, except that a key given twice in one mapping (at any
    depth) is refused, naming the key and its lines: safe_load would keep the last one
    silently, so ``name: a`` then ``name: b`` would run a study nobody meant."""
    import yaml

    class _UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            first_lines: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # '<<: *anchor' merges; its keys may be overridden
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    first = first_lines.get(key)
                except TypeError:
                    continue  # an unhashable key: safe_load itself refuses it
                if first is not None:
                    raise SpecError(f"spec file: {where} line {line}: key {key!r} is given twice "
                                    f"(first on line {first}); give each key once")
                first_lines[key] = line
            return super().construct_mapping(node, deep=deep)

    return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader: no arbitrary objects


def load_spec_dict(path: str | None) -> dict:
    """A spec dict from a YAML file or a shipped study's name; quickstart when None."""
    if path is None:
        return default_spec_dict()
    import os

    import yaml

    if not os.path.exists(path) and path in shipped_studies() + shipped_experiments():
        return default_spec_dict(path)
    try:
        with open(path, encoding="utf-8") as fh:
            raw = load_yaml(fh.read(), path)
    except FileNotFoundError:
        raise SpecError(f"spec file: {path} does not exist ({_shipped_text()})") from None
    except OSError as err:
        raise SpecError(f"spec file: {path} cannot be read ({err.strerror}); allowed: a readable "
                        "YAML file or a shipped study's name") from None
    except UnicodeDecodeError:
        raise SpecError(f"spec file: {path} is not UTF-8 text; allowed: a YAML file") from None
    except yaml.YAMLError as err:
        raise SpecError(yaml_error_line(err, path)) from None
    if not isinstance(raw, dict):
        fail_field("spec file", f"{path} must hold a mapping of study fields")
    return raw


# What a parser's problem usually means in a hand-written spec: the problem text (start)
# and a plain hint. A tab in a line's indentation gets its own hint, whatever the problem.
TAB_HINT = "YAML indents with spaces, not tabs"
_PROBLEM_HINTS = (
    ("mapping values are not allowed here", "a line indented deeper than the key above it, or "
     "a value holding ': ' that needs quotes"),
    ("expected <block end>", "a line indented less than the lines of its block: keys (and "
     "list items) of one mapping line up"),
)


_BREAKS = "\n\r\x85\u2028\u2029"  # what yaml counts as a line break


def yaml_error_line(err, where: str) -> str:
    """One line for a YAML parse error: ``spec file: WHERE line L, column C ('<the line>'):
    <the parser's problem> (<its context> started on line L', column C'); <a hint>``.

    yaml's own message spans five lines (context, marks, the line with a caret); its first
    line alone ("while scanning for the next token") says neither where nor what. The
    marks are 0-based; people and editors count from 1. A tab in the indentation of the
    line the parser stopped at gets TAB_HINT; two common indentation mistakes get theirs."""
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    if mark is None:
        return f"spec file: {where} is not valid YAML ({problem})"
    line = _marked_line(mark)
    shown = line if len(line) <= 60 else line[:57] + "..."
    out = (f"spec file: {where} line {mark.line + 1}, column {mark.column + 1}"
           + (f" ({shown!r})" if line.strip() else "") + f": {problem}")
    context, context_mark = getattr(err, "context", None), getattr(err, "context_mark", None)
    if context:
        at = (f" started on line {context_mark.line + 1}, column {context_mark.column + 1}"
              if context_mark is not None and context_mark.line != mark.line else "")
        out += f" ({context}{at})"
    indent = line[:len(line) - len(line.lstrip(" \t"))]
    if "\t" in indent:
        return f"{out}; {TAB_HINT}"
    hint = next((hint for start, hint in _PROBLEM_HINTS if problem.startswith(start)), None)
    return f"{out}; {hint}" if hint else out


def _marked_line(mark) -> str:
    """The text of the line a yaml mark points into (from the buffer yaml parsed)."""
    buffer, at = getattr(mark, "buffer", None), getattr(mark, "pointer", 0)
    if not isinstance(buffer, str):
        return ""
    start = max(buffer.rfind(c, 0, at) for c in _BREAKS) + 1
    ends = [i for i in (buffer.find(c, at) for c in _BREAKS + "\0") if i >= 0]
    return buffer[start:min(ends, default=len(buffer))]


def resolve_spec(study_spec: dict, store_root: str = "") -> StudySpec:
    """The StudySpec a pipeline task works on: ``store_root``, when given, overrides the
    spec's store (the Kubeflow UI run parameter that points a study at a bucket)."""
    raw = dict(study_spec)
    if store_root:
        raw["store"] = store_root
    return parse_spec(raw)
