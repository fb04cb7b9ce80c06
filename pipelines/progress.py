"""How far a study has got, read from its store (for progress lines while it runs)."""

from __future__ import annotations

from dataclasses import dataclass

from batchscale.core.goals import first_step_reaching
from batchscale.core.spec import StudySpec
from batchscale.core.trial_state import is_finished
from batchscale.search.trials import batch_trials


@dataclass
class Progress:
    done: int
    total: int
    infeasible: int
    best_steps: dict[int, int | None]  # first goal, validation; None = not reached yet
    added: int = 0  # trials later search rounds added (top-ups, re-searches)

    def line(self) -> str:
        best = " ".join(f"{b}:{'-' if s is None else s}" for b, s in self.best_steps.items())
        extra = f", {self.infeasible} diverged" if self.infeasible else ""
        extra += f", {self.added} added by later rounds" if self.added else ""
        return f"trials {self.done}/{self.total} done{extra} | best steps per batch size {best}"


class ProgressTracker:
    """Polls the store for the spec's trials; a finished trial is read once and only its
    first validation step beating the study's first goal is kept (``core.goals``' rule,
    the one steps to result uses).

    Each poll reads only the metadata of trials not yet finished, and the study.json of
    each batch size with none (the planner adds a search round only to a batch size whose
    trials have all finished), so polling stays cheap for studies of hundreds of trials
    on gs://.
    """

    def __init__(self, spec: StudySpec, store):
        self.spec, self.store = spec, store
        self.pending = []
        self.known: set[tuple[int, int]] = set()
        self.initial = len(spec.batch_sizes) * spec.trials_per_batch_size
        self.done = 0
        self.infeasible = 0
        self.best: dict[int, int | None] = dict.fromkeys(spec.batch_sizes)  # steps to result so far

    def poll(self) -> Progress:
        busy = {trial.batch_size for trial in self.pending}
        for batch_size in (b for b in self.spec.batch_sizes if b not in busy):
            rounds = self.store.read_rounds(self.spec, batch_size)
            for trial in batch_trials(self.spec, batch_size, rounds):
                if (trial.batch_size, trial.trial_id) in self.known:
                    continue
                self.known.add((trial.batch_size, trial.trial_id))
                self.pending.append(trial)
        still = []
        for trial in self.pending:
            meta = self.store.read_metadata(self.spec, trial)
            if is_finished(meta, self.spec.max_steps[trial.batch_size]):
                self.done += 1
                self.infeasible += meta["status"] == "INFEASIBLE"
                if meta["status"] == "COMPLETE":  # only COMPLETE trials count toward a goal
                    self._reached(trial.batch_size, self.store.read_measurements(self.spec, trial))
            else:
                still.append(trial)
        self.pending = still
        return self.progress()

    def _reached(self, batch_size: int, rows: list[dict]) -> None:
        step = first_step_reaching(rows, self.spec.goals[0], "val")
        best = self.best.get(batch_size)
        if step is not None and (best is None or step < best):
            self.best[batch_size] = step

    def progress(self) -> Progress:
        return Progress(self.done, self.done + len(self.pending), self.infeasible, dict(self.best),
                        max(len(self.known) - self.initial, 0))
