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


def default_spec_dict(name: str = "quickstart") -> dict:
    """A shipped spec by name; quickstart (the embedded default study) unless told."""
    import yaml

    text = resources.files("batchscale.studies").joinpath(f"{name}.yaml").read_text()
    return yaml.safe_load(text)


def load_spec_dict(path: str | None) -> dict:
    """A spec dict from a YAML file or a shipped study's name; quickstart when None."""
    if path is None:
        return default_spec_dict()
    import os

    import yaml

    if not os.path.exists(path) and path in shipped_studies():
        return default_spec_dict(path)
    try:
        with open(path) as fh:
            raw = yaml.safe_load(fh)
    except FileNotFoundError:
        raise SpecError(f"spec file: {path} does not exist (shipped studies: "
                        f"{', '.join(shipped_studies())})") from None
    except yaml.YAMLError as err:
        raise SpecError(f"spec file: {path} is not valid YAML ({str(err).splitlines()[0]})") from None
    if not isinstance(raw, dict):
        fail_field("spec file", f"{path} must hold a mapping of study fields")
    return raw


def resolve_spec(study_spec: dict, store_root: str = "") -> StudySpec:
    """The StudySpec a pipeline task works on: ``store_root``, when given, overrides the
    spec's store (the Kubeflow UI run parameter that points a study at a bucket)."""
    raw = dict(study_spec)
    if store_root:
        raw["store"] = store_root
    return parse_spec(raw)
