"""The quickstart-like report (tests/report_store.py) in a real headless Chromium: the
answer is laid out above the first figure, the table of contents links every section,
clicking a header of the all-trials table sorts it (both ways, blanks last), and the page
names no path of this machine (not the store's temporary folder, the home directory or
the repository)."""

from __future__ import annotations

import os
import re

from batchscale.analysis.report import report_study
from tests import report_store as qs
from tests.browser import chromium, run_probe

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROBE = """(function () {
  var top = function (el) { return el ? el.getBoundingClientRect().top + window.scrollY : null; };
  var answer = document.getElementById('answer');
  var figure = document.querySelector('figure, img, svg');
  var table = document.getElementById('trials-table');
  var heads = Array.prototype.map.call(table.tHead.rows[0].cells, function (c) { return c.textContent; });
  var column = function (i) {
    return Array.prototype.map.call(table.tBodies[0].rows, function (r) { return r.cells[i].textContent; });
  };
  var click = function (name) {
    var i = heads.findIndex(function (h) { return h.indexOf(name) === 0; });
    table.tHead.rows[0].cells[i].click();
    return column(i);
  };
  var before = column(heads.indexOf('steps_trained'));
  var up = click('steps_trained'), down = click('steps_trained'), crossing = click('first step');
  var links = Array.prototype.map.call(document.querySelectorAll('nav#contents a'), function (a) {
    var id = a.getAttribute('href').slice(1);
    return [id, !!document.getElementById(id) && document.getElementById(id).tagName];
  });
  return {answer: top(answer), answerBottom: answer.getBoundingClientRect().bottom + window.scrollY,
          contents: top(document.getElementById('contents')), figure: top(figure),
          answerText: answer.innerText, heads: heads, before: before, up: up, down: down,
          crossing: crossing, links: links,
          sections: Array.prototype.map.call(document.querySelectorAll('h2'), function (h) { return h.id; })};
})()"""


def _numbers(cells):
    return [float(c) for c in cells]


def test_the_report_answers_first_links_its_sections_sorts_its_trials_and_names_no_path(tmp_path):
    chromium()
    location = qs.build(str(tmp_path / "store"))
    analysis, written = report_study(location, resamples=200)
    html = written["pages"]["html"]
    assert html == open(written["html"]).read()
    visible = re.sub(r"data:[^\"')]+", "", html)  # embedded figures are base64, not text
    home = os.path.expanduser("~").rstrip("/")
    for path in (str(tmp_path), ROOT, *([home + "/"] if home else [])):
        assert path not in visible, path

    got = run_probe(html, PROBE, tmp_path)
    assert got["figure"] is not None
    assert got["answer"] < got["answerBottom"] <= got["figure"]  # the answer, then figures
    assert got["answer"] < got["contents"] < got["figure"]
    for _key, _label, text in analysis.answer.items:
        assert text in got["answerText"]
    assert "beyond the largest batch size measured (512); the data bound it only from below: ≥ " in (
        got["answerText"])

    assert [id for id, _tag in got["links"]] == got["sections"]  # every section, in order
    assert all(tag == "H2" for _id, tag in got["links"])
    assert {"regimes", "figures", "robustness", "budgets", "trials", "methods"} <= set(got["sections"])

    assert got["heads"][:3] == ["batch_size", "trial_id", "status"] and "weight_decay" in got["heads"]
    assert len(got["before"]) == 4 * len(qs.BATCH_SIZES)
    assert _numbers(got["up"]) == sorted(_numbers(got["before"]))
    assert _numbers(got["down"]) == sorted(_numbers(got["before"]), reverse=True)
    reached = [c for c in got["crossing"] if c]
    assert _numbers(reached) == sorted(_numbers(reached)) and len(reached) == 2 * len(qs.BATCH_SIZES)
    assert got["crossing"][len(reached):] == [""] * (len(got["crossing"]) - len(reached))  # blanks last
