"""The answer that opens report.html and summary.md and closes the console
(``statistics.answer`` computes it): one section, rendered to each.

Kept apart from the answer's computation so that the statistics room renders nothing.
"""

from __future__ import annotations

from batchscale.analysis.pages.sections import Highlights, Section, render_console
from batchscale.analysis.statistics.answer import Answer


def answer_section(ans: Answer) -> Section:
    """The answer box: no heading of its own (the contents do not list it)."""
    return Section(None, None, [Highlights(ans.heading, [(label, text) for _k, label, text in ans.items])])


def console_lines(doc: dict | None) -> list[str]:
    """The answer as the console prints it, from summary.json's ``answer`` (none: [])."""
    if not isinstance(doc, dict) or not doc.get("items"):
        return []
    return render_console(Section(None, None, [Highlights(
        doc["heading"], [(i["label"], i["text"]) for i in doc["items"]])]))
