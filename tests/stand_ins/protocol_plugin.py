"""A STAND-IN for a stopping protocol added outside batchscale: a test-only plugin.

Named by ``BATCHSCALE_PLUGINS=tests.stand_ins.protocol_plugin``, this module is imported
at the first protocol look-up of every process of a study (the CLI, kfp.local's task
subprocesses) and registers ``goal_alone``: a trial stops once it beats every goal, as
under ``goal``, but the protocol belongs to no family, so a study registered under it may
not switch to ``goal`` or ``race`` (nor they to it). Its summary and method carry the
words "test-only plugin", so a test can find them in the CLI's refusal and the report.

What it does NOT show: a protocol with a new stop rule. Trainers act on the record's
fields (``stops_at_goal``, ``races``), so a protocol is a new combination of those, its
words, its switch family and its plan estimate; a new rule needs a new field.
"""

from __future__ import annotations

from batchscale.core.protocols import StoppingProtocol, register, to_own_crossing

NAME = "goal_alone"
SUMMARY = "stop once every goal is beaten, switching with no other protocol; a test-only plugin"
METHOD = ("a trial stopped once it beat every goal of the study (goal_alone, a test-only "
          "plugin protocol that no study may switch to or from).")

GOAL_ALONE = register(StoppingProtocol(
    NAME, summary=SUMMARY, method=METHOD, stops_at_goal=True, races=False,
    estimate=to_own_crossing, family=None))
