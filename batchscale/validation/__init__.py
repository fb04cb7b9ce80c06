"""Validation: the one door from a raw study spec (YAML, CLI flags, a KFP parameter, the
store) to a typed ``StudySpec``, checked against the workload registries before any work
starts. Every refusal is a one-line ``SpecError`` naming the field and what is allowed.
"""

from batchscale.validation.spec_files import default_spec_dict, load_spec_dict, resolve_spec, shipped_studies
from batchscale.validation.study_spec import parse_spec, with_batch_sizes

__all__ = ["default_spec_dict", "load_spec_dict", "parse_spec", "resolve_spec", "shipped_studies",
           "with_batch_sizes"]
