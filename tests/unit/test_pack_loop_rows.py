"""A group resumed at a step where some of its trials were evaluated before the
checkpoint and others not (groups of one step and width joined where their positions
are free, ``pack_groups._join_resumed``) gives each trial one row at that step."""

from types import SimpleNamespace

from batchscale.training.pack_loop import _Loop


class _Life:
    def __init__(self, step, rows):
        self.step, self.rows = step, rows

    def record(self, row):
        self.rows.append(row)

    def evaluated(self):
        return bool(self.rows) and self.rows[-1]["step"] == self.step


def test_a_resumed_trial_evaluated_before_its_checkpoint_gets_no_second_row_there():
    loop = object.__new__(_Loop)
    runs = [SimpleNamespace(done=False, life=_Life(20, [{"step": 0}, {"step": 19}])),  # not yet
            SimpleNamespace(done=False, life=_Life(20, [{"step": 0}, {"step": 20}]))]  # evaluated
    loop.runs, loop.grids, loop.eval_seconds, loop.started = runs, [{0, 19, 20}] * 2, 0.0, 0.0
    loop._evaluation = lambda state, step, started: [{"step": step, "new": True} for _ in runs]
    loop.state = None
    loop._evaluate(20)
    assert [[r["step"] for r in run.life.rows] for run in runs] == [[0, 19, 20], [0, 20]]
