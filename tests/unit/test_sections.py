"""One report section, one definition: report.html and summary.md are rendered from the
same ``Section`` (batchscale/analysis/pages/sections.py), so both carry the same heading,
numbers and table rows; a block limited to one medium shows only there."""

from __future__ import annotations

import re

import pandas as pd

from batchscale.analysis.pages.report_tables import budgets_section
from batchscale.analysis.pages.sections import (
    HTML,
    Bullets,
    Code,
    Figures,
    Notes,
    Paragraph,
    Section,
    Table,
    Warnings,
    render_console,
    render_html,
    render_markdown,
)
from batchscale.analysis.statistics.study_analysis import Analysis

SVG = b'<svg xmlns="http://www.w3.org/2000/svg" width="10pt" height="10pt"></svg>'


def _section() -> Section:
    table = pd.DataFrame({"batch_size": [16, 32], "steps_to_result": [1200.0, 640.5]})
    return Section("steps", "Steps to result: err<0.3", [
        Paragraph("Fewest steps at batch size 32."), Table(table), Notes(["one trial diverged"]),
        Warnings(["2 of 8 trials stopped early"]), Bullets([("read from ", Code("/s/16"))]),
        Figures([("steps.svg", SVG, "caption")], media=(HTML,))])


def test_one_definition_gives_the_same_heading_numbers_and_rows_in_html_and_markdown():
    section = _section()
    page, markdown = "\n".join(render_html(section)), "\n".join(render_markdown(section))
    assert '<h2 id="steps">Steps to result: err&lt;0.3</h2>' in page
    assert markdown.startswith("## Steps to result: err<0.3\n")
    rows_html = re.findall(r"<tr>(.*?)</tr>", page)
    rows_md = [line for line in markdown.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows_html) == len(rows_md) == 3  # the head and two rows
    for number in ("16", "32", "1200", "640.5"):
        assert f"<td>{number}</td>" in page and f"| {number} |" in markdown + " |"
    assert "Fewest steps at batch size 32." in page and "Fewest steps at batch size 32." in markdown
    assert '<p class="note">one trial diverged</p>' in page and "- one trial diverged" in markdown
    assert '<div class="warn">2 of 8 trials stopped early</div>' in page
    assert "**2 of 8 trials stopped early**" in markdown
    assert "<li>read from <code>/s/16</code></li>" in page and "- read from `/s/16`" in markdown
    assert "data:image/svg+xml;base64," in page and "steps.svg" not in markdown  # HTML only


def test_the_console_shows_the_same_table_aligned():
    lines = render_console(_section())
    assert lines[0] == "Steps to result: err<0.3"
    assert "batch_size  steps_to_result" in lines and "        16             1200" in lines
    assert "note: one trial diverged" in lines


def test_nothing_to_show_renders_nothing():
    assert render_html(None) == render_markdown(None) == render_console(None) == []
    hidden = Section("x", "x", [Paragraph("y")], media=(HTML,))
    assert render_markdown(hidden) == [] and render_html(hidden)[0] == '<h2 id="x">x</h2>'


def test_a_report_section_is_a_function_of_the_typed_analysis():
    budgets = pd.DataFrame({"kind": ["steps"], "budget": [1024], "batch_size": [16],
                            "best_value": [0.125], "censored": [False]})
    study = type("S", (), {"train_examples": None})()
    analysis = Analysis.__new__(Analysis)
    analysis.budgets, analysis.study = budgets, study
    section = budgets_section(analysis)
    page, markdown = "".join(render_html(section)), "\n".join(render_markdown(section))
    assert "<td>0.125</td>" in page and "| 16 | 0.125 |" in markdown
    title = "Best validation metric under budgets"
    assert f'<h2 id="budgets">{title}</h2>' in page and f"## {title}" in markdown
