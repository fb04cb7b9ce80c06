"""One pack task's work, whichever pipeline runs it (a study's ``train_pack``, an
experiment's ``train_experiment_pack``): check the workload, re-derive each pack's
trials from the spec and the search rounds in the store, train them, and say what
happened.

A task trains a *lane* (``search.lanes``): its share of the round's packs, one pack after
another in one process. A pack whose trials are all finished costs a few reads of the
store (``run_pack`` re-uses them), so a resubmitted study skips its finished packs
without relying on KFP's retries or caching. A pack that fails does not stop the lane:
the others still train, and the task fails at the end naming the packs that failed (so
KFP retries it, and a retry re-uses what finished). A stop (SIGTERM) ends the lane at
once, its trials checkpointed (``training.signals``).
"""

from __future__ import annotations

import traceback

from batchscale.core.spec import PackSpec, StudySpec
from batchscale.search.packs import make_pack, pack_trials
from batchscale.store.layout import StudyStore
from batchscale.training.pack_summary import PackSummary, summarize_pack
from batchscale.training.packs import run_pack
from batchscale.training.workload_check import check_model_source, check_user_workload


class LaneFailedError(RuntimeError):
    """Some packs of a lane failed; the others trained."""


def train_lane_task(spec: StudySpec, lane: dict, log=print) -> PackSummary:
    """Train the packs of ``lane`` (``{"lane": K, "packs": [PackSpec dicts]}``) one after
    another; returns one summary of all their trials. Raises ``LaneFailedError`` after the
    last pack when any pack raised (each one's traceback printed as it happened)."""
    check_user_workload(spec, files=False)  # the user's model function: importable here, sound
    store = StudyStore(spec.store)
    check_model_source(spec, store, record=True)  # the code its finished trials were trained by
    packs = [PackSpec.from_dict(p) for p in lane["packs"]]
    trials, metas, failed, done = [], [], [], []
    for number, descriptor in enumerate(packs, start=1):
        if len(packs) > 1:
            log(f"lane {lane['lane']}: pack {number}/{len(packs)} {descriptor.pack_id}")
        try:
            rounds = {b: store.read_rounds(spec, b) for b in descriptor.batch_sizes}
            these = pack_trials(spec, descriptor, rounds)
            metas += run_pack(spec, these, store)
            trials += these
            done.append(descriptor)
        except Exception as error:  # noqa: BLE001  (reported below; a stop is not an Exception)
            traceback.print_exc()
            failed.append(f"{descriptor.pack_id} ({type(error).__name__}: {error})")
    summary = summarize_pack(spec, _lane_pack(done or packs), trials, metas, store,
                             title=None if len(packs) == 1 else f"Lane {lane['lane']}")
    if failed:
        print(summary.markdown)
        raise LaneFailedError(f"{len(failed)} of {len(packs)} packs failed: {'; '.join(failed)}")
    return summary


def _lane_pack(packs: list[PackSpec]) -> PackSpec:
    """One descriptor holding every trial of ``packs``, by batch size (what the summary
    groups by; a lane of several batch sizes reads as a mixed pack)."""
    if len(packs) == 1:
        return packs[0]
    by_size: dict[int, list[int]] = {}
    for pack in packs:
        for batch_size, ids in pack.parts:
            by_size.setdefault(batch_size, []).extend(ids)
    return make_pack([(b, tuple(sorted(ids))) for b, ids in sorted(by_size.items())])


def train_experiment_lane(experiment, lane: dict) -> PackSummary:
    """An experiment's lane (``{"lane": K, "packs": [{"study", "pack"}, ...]}``): each
    study's packs as its own lane (``train_lane_task``), in the order they come; Metrics
    names carry the study's label. Raises ``LaneFailedError`` after the last study when any
    pack failed."""
    by_study: dict[str, list[dict]] = {}
    for item in lane["packs"]:
        by_study.setdefault(item["study"], []).append(item["pack"])
    metrics, pages, lines, failed = {}, [], [], []
    for label, packs in by_study.items():
        try:
            shown = train_lane_task(experiment.study(label), {"lane": lane["lane"], "packs": packs})
        except LaneFailedError as error:
            failed.append(f"{label}: {error}")
            continue
        metrics.update({f"{label}_{name}": value for name, value in shown.metrics.items()})
        pages.append(f"## Study {label}\n\n{shown.markdown}")
        lines.append(f"{label}: {shown.line}")
    if failed:
        raise LaneFailedError("; ".join(failed))
    return PackSummary(metrics, "\n".join(pages), " | ".join(lines))
