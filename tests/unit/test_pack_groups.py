"""How a pack's trials are grouped for the vmapped loop (``pack_groups``): fresh trials
fill groups in order; a resumed trial, and a trial its checkpoint names as a member of its
group, go back to their places in a group as wide as before."""

from types import SimpleNamespace

from batchscale.training.pack_groups import pack_groups


def _run(trial_id, step=0, width=None, position=None, members=None):
    """A ``pack_loop.TrialRun`` as ``pack_groups`` sees it (fresh unless ``width`` is set)."""
    return SimpleNamespace(trial=SimpleNamespace(trial_id=trial_id), step=step, width=width,
                           position=position, members=members)


def test_fresh_trials_fill_groups_in_order():
    assert pack_groups([_run(i) for i in range(1, 6)], 3) == [([0, 1, 2], [0, 1, 2]), ([3, 4], [0, 1])]


def test_a_resumed_trial_takes_back_its_place_in_a_group_as_wide_as_before():
    runs = [_run(2, step=40, width=3, position=1, members=[1, 2, 3])]
    assert pack_groups(runs, 3) == [([0], [None, 0, None])]


def test_trials_killed_before_their_first_checkpoint_go_back_to_their_places():
    """Trial 1 wrote its first checkpoint, trials 2 and 3 (its group) had not when the pack
    was killed: they start again at step 0 in a group of three at positions 1 and 2, as
    they trained, not in a fresh group of two (another vmap width: other rounding)."""
    runs = [_run(1, step=7, width=3, position=0, members=[1, 2, 3])] + [_run(i) for i in (2, 3, 4, 5)]
    assert pack_groups(runs, 3) == [
        ([1, 2], [None, 0, 1]),  # trials 2, 3 at step 0, where they were
        ([3, 4], [0, 1]),  # trials 4, 5: the pack's second group, fresh as before
        ([0], [0, None, None]),  # trial 1 at its step 7
    ]


def test_a_checkpoint_without_members_leaves_fresh_trials_to_fresh_groups():
    """Checkpoints written before members were recorded: fresh trials group as before."""
    runs = [_run(1, step=7, width=3, position=0)] + [_run(i) for i in (2, 3)]
    assert pack_groups(runs, 3) == [([1, 2], [0, 1]), ([0], [0, None, None])]
