"""KFP wrapper of run_pack: one ParallelFor iteration trains one pack of trials."""

from kfp import dsl

from batchscale.core.images import LIGHT_IMAGE


# The image is the placement preset's (a GPU or TPU build), set when the pipeline is built.
@dsl.component(base_image=LIGHT_IMAGE, install_kfp_package=False)
def train_pack(study_spec: dict, pack: dict, store_root: str) -> str:
    """Train (or re-use, or resume) the pack's trials, re-derived from the spec and the
    search rounds recorded in the store; returns a one-line summary of their statuses.
    Divergence is a status, not an error."""
    from collections import Counter

    from batchscale.core.spec import PackSpec
    from batchscale.search.packs import pack_trials
    from batchscale.store.layout import StudyStore
    from batchscale.training.packs import run_pack
    from batchscale.validation import resolve_spec

    spec = resolve_spec(study_spec, store_root)
    descriptor, store = PackSpec.from_dict(pack), StudyStore(spec.store)
    trials = pack_trials(spec, descriptor, store.read_rounds(spec, descriptor.batch_size))
    results = run_pack(spec, trials, store)
    counts = Counter(meta["status"] for meta in results)
    return f"{descriptor.pack_id}: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
