"""What kfp.local's task processes inherit from ``batchscale run --local``."""

from __future__ import annotations

import pytest

from batchscale.pipelines.local_run import ONE_THREAD_XLA_FLAG, task_environment


@pytest.mark.parametrize("parallelism, cores, one_thread", [
    (2, 2, True),   # the quickstart on this machine: a core per task
    (4, 2, True),
    (1, 2, False),  # one task at a time: it gets every core
    (2, 8, False),
    (3, 8, False),
    (8, 8, True),
])
def test_tasks_compute_on_one_thread_when_they_have_one_core_each(parallelism, cores, one_thread):
    env = task_environment(parallelism, cores, {})
    assert (env.get("XLA_FLAGS") == ONE_THREAD_XLA_FLAG) is one_thread
    if not one_thread:
        assert env == {}


def test_a_users_xla_flags_are_kept_and_their_thread_choice_wins():
    assert task_environment(2, 2, {"XLA_FLAGS": "--xla_dump_to=/tmp/x"}) == {
        "XLA_FLAGS": f"--xla_dump_to=/tmp/x {ONE_THREAD_XLA_FLAG}"}
    assert task_environment(2, 2, {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=true"}) == {}
