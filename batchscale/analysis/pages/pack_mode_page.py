"""The report's "Pack modes" section: per batch size, whether its trials trained vmapped
together or took turns, and the probe's measured rates that chose it
(``statistics.pack_modes``)."""

from __future__ import annotations

from batchscale.analysis.pages.sections import Notes, Paragraph, Section, Table
from batchscale.analysis.statistics.pack_modes import pack_mode_table
from batchscale.analysis.statistics.study_analysis import Analysis

TITLE = "Pack modes"
EXPLAINED = ("A pack's trials train vmapped together in one compiled step or take turns, one "
             "trial at a time through a width-1 step; a short probe at the pack's start times "
             "both (trial-steps per second of a whole trial, evaluations included) and chooses "
             "vmapped only when it is faster by the margin, else turns. The choice is kept in "
             "the study's profile/pack_modes/, so later packs and re-runs train as the first "
             "did; a trial resumed from a checkpoint keeps the mode it started in. XLA rounds "
             "a vmapped step differently from a width-1 one: fresh runs that chose differently "
             "(another machine, another load) may differ in low bits.")


def pack_mode_section(analysis: Analysis) -> Section | None:
    """"Pack modes" (None: no record and no trial naming its mode)."""
    table, notes = pack_mode_table(analysis.study)
    if table.empty and not notes:
        return None
    return Section("pack-modes", TITLE, [Table(table), Paragraph(EXPLAINED, note=True),
                                         Notes(notes)])
