"""The answer box that opens report.html and summary.md (``statistics.answer`` computes it).

Kept apart from the answer's computation so that the statistics room renders nothing.
"""

from __future__ import annotations

from batchscale.analysis.pages import html as h
from batchscale.analysis.statistics.answer import Answer


def answer_html(ans: Answer) -> str:
    """The answer box that opens report.html (above the contents and every figure)."""
    items = "".join(f"<li><strong>{h.esc(label)}</strong>: {h.esc(text)}</li>"
                    for _key, label, text in ans.items)
    return f'<div class="answer" id="answer"><p>{h.esc(ans.heading)}:</p><ul>{items}</ul></div>'


def answer_markdown(ans: Answer) -> list[str]:
    return [f"**{ans.heading}:**", "", *(f"- **{label}**: {text}" for _k, label, text in ans.items),
            ""]
