"""The report answers first, on a quickstart-like study written by hand (tests/report_store.py):
the answer's items against values worked out from the rows written (fewest steps, the
fastest batch size, what the protocol trained against full), its place above the contents
and every figure (HTML), above the regimes (Markdown) and at the end of the console; the
budgets table in wide form; every trial in a table and trials.csv; Kubeflow metrics that
leave out the end the data do not bound; and no local path of this machine in the report."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from batchscale.analysis.pages import report_tables
from batchscale.analysis.pages.html import fmt
from batchscale.analysis.pages.report_tables import budgets_wide, trials_section
from batchscale.analysis.pages.sections import render_html
from batchscale.analysis.reading.locations import private_root, shown_location
from batchscale.analysis.reading.study_reader import load_study
from batchscale.analysis.report import analyse, kfp_metrics, write_report
from batchscale.analysis.statistics.intervals import ABOVE, MEASURED, number
from batchscale.analysis.statistics.training_cost import count_text
from batchscale.cli.analysis import EXIT_DAMAGED, print_stored_report, print_summary
from batchscale.store.layout import StudyStore
from tests import report_store as qs


def trials_html(analysis):  # the section, as the page shows it
    return render_html(trials_section(analysis))


GOAL = "classification_error<0.08"
WORKLOAD = "quickstart/mnist_5k/fc_128_128/nesterov_momentum"


def _file(out: dict, name: str) -> str:
    return f"{out['folder'].rstrip('/')}/{name}"


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    root = tmp_path_factory.mktemp("answer") / "store"
    analysis = analyse(load_study(qs.build(str(root))), resamples=200)
    return root, analysis, write_report(analysis)


def test_the_answer_names_the_fewest_steps_fastest_regimes_and_savings(written):
    _root, analysis, _ = written
    items = {key: text for key, _label, text in analysis.answer.items}
    assert list(items) == ["fewest_steps", "time_and_cost", "perfect_scaling_end",
                           "max_useful_batch_size", "savings"]
    fewest = min(qs.BATCH_SIZES, key=qs.steps_at)
    assert items["fewest_steps"].startswith(f"batch size {fewest}, {qs.steps_at(fewest)} steps")
    fastest = min(qs.BATCH_SIZES, key=lambda b: qs.steps_at(b) * qs.seconds_per_step(b))
    assert items["time_and_cost"].startswith(f"fastest batch size {fastest}, ")
    fit = analysis.fits[GOAL]
    assert fit.max_useful_batch_size.status == ABOVE  # 10 B* = 3000 > 512
    assert items["max_useful_batch_size"] == (
        "the fit puts it beyond the largest batch size measured (512); the data bound it only "
        f"from below: ≥ {number(fit.max_useful_batch_size.low)}")
    if fit.perfect_scaling_end.status == MEASURED:
        end = fit.perfect_scaling_end
        assert items["perfect_scaling_end"] == (
            f"at batch size {number(end.value)} [{number(end.low)}, {number(end.high)}]")
    trained = sum(2 * qs.steps_at(b) + round(1.25 * qs.steps_at(b)) + 10 for b in qs.BATCH_SIZES)
    full = sum(3 * qs.BUDGET + 10 for _ in qs.BATCH_SIZES)  # diverged trials: their own steps
    assert items["savings"].startswith(f"{count_text(trained)} steps over 28 trials, "
                                       f"{trained / full:.0%} of the {count_text(full)} that "
                                       "protocol full")


def test_the_answer_comes_first_in_every_form(written, capsys):
    _root, analysis, out = written
    page, markdown = out["pages"]["html"], out["pages"]["markdown"]
    texts = [text for _k, _l, text in analysis.answer.items]
    answer_at = page.index('<div class="answer" id="answer">')
    assert answer_at < page.index('<nav id="contents">') < page.index("<figure")
    assert all(page.index(text.replace("<", "&lt;")) < page.index("<figure") for text in texts)
    assert all(markdown.index(text) < markdown.index("## Regimes") for text in texts)
    doc = json.loads(open(_file(out, "summary.json")).read())
    assert [i["text"] for i in doc["answer"]["items"]] == texts and doc["answer"]["goal"] == GOAL
    steps = pd.read_csv(_file(out, "steps_to_result.csv"))
    print_summary(steps, doc, "/r/report.html")
    lines = capsys.readouterr().out.splitlines()
    assert lines[-len(texts) - 2] == f"The answer for {GOAL} on the validation metric (95% intervals):"
    assert [line.split(": ", 1)[1] for line in lines[-len(texts) - 1:-1]] == texts
    assert lines[-1] == "report: /r/report.html"
    regimes = next(line for line in lines if line.startswith(f"{GOAL}: S_min"))
    assert "max useful batch size ≥ " in regimes and "inf" not in regimes and "?" not in regimes


def test_the_contents_link_every_section(written):
    page = written[2]["pages"]["html"]
    nav = page[page.index('<nav id="contents">'):page.index("</nav>")]
    anchors = [a.split('"')[0] for a in nav.split('href="#')[1:]]
    sections = [h.split('"')[0] for h in page.split('<h2 id="')[1:]]
    assert anchors == sections and len(set(anchors)) == len(anchors)
    assert {"regimes", "time-and-cost", "figures", "robustness", "budgets", "trials",
            "methods"} <= set(anchors)


def test_budgets_are_one_row_per_batch_size_and_budgets_csv_stays_long(written):
    _root, analysis, out = written
    long = analysis.budgets
    wide = budgets_wide(long)
    assert wide["batch_size"].tolist() == list(qs.BATCH_SIZES)
    assert len(wide.columns) == 1 + len(long[["kind", "budget"]].drop_duplicates())
    for row in long.itertuples():
        column = report_tables.budget_label(row.kind, row.budget, None)
        cell = wide.loc[wide["batch_size"] == row.batch_size, column].item()
        assert cell == fmt(row.best_value) + (" (censored)" if row.censored else "")
    assert len(pd.read_csv(_file(out, "budgets.csv"))) == len(long)  # long, as code reads it
    assert "| batch_size | ≤ " in out["pages"]["markdown"]


def test_every_trial_is_in_a_sortable_table_and_trials_csv(written, monkeypatch):
    _root, analysis, out = written
    trials = pd.read_csv(_file(out, "trials.csv"))
    assert len(trials) == 4 * len(qs.BATCH_SIZES)
    crossing = f"first step {GOAL}"
    assert list(trials.columns) == ["batch_size", "trial_id", "status", "learning_rate", "momentum",
                                    "weight_decay", "steps_trained", crossing, "stop_reason",
                                    "censored"]
    for b in qs.BATCH_SIZES:
        rows = trials[trials["batch_size"] == b].set_index("trial_id")
        assert rows.loc[1, crossing] == qs.steps_at(b)
        assert rows.loc[2, crossing] == round(1.25 * qs.steps_at(b))
        assert pd.isna(rows.loc[3, crossing]) and rows.loc[3, "stop_reason"] == "race"
        assert rows.loc[4, "status"] == "INFEASIBLE" and rows.loc[4, "steps_trained"] == 10
    page = out["pages"]["html"]
    table = page[page.index('<table class="sortable" id="trials-table">'):]
    assert table[:table.index("</table>")].count("<tr>") == len(trials) + 1
    assert "<script>" in page and "<details open>" in page
    monkeypatch.setattr(report_tables, "OPEN_UP_TO", 10)  # a long list starts folded
    assert "<details>" in "".join(trials_html(analysis))


def test_kfp_metrics_leave_out_the_end_the_data_do_not_bound(written):
    analysis = written[1]
    metrics = kfp_metrics(analysis)
    useful = f"val/{GOAL}/max_useful_batch_size"
    low = analysis.fits[GOAL].max_useful_batch_size.low
    assert metrics[f"{useful}/low"] == pytest.approx(low)
    assert useful not in metrics and f"{useful}/high" not in metrics  # ≥ low: no value, no end
    if analysis.fits[GOAL].perfect_scaling_end.status == MEASURED:
        end = f"val/{GOAL}/perfect_scaling_end"
        assert {end, f"{end}/low", f"{end}/high"} <= set(metrics)


def test_the_report_names_no_local_path(tmp_path, capsys):
    """Not the store's folder, even where a damaged file is named; the console, which
    prints the stored report after a local run, names the file where it is."""
    root = tmp_path / "store"
    location = qs.build(str(root))
    (root / WORKLOAD / "8" / "2" / "measurements.csv").write_text("step,val/classification_error\n0,0.")
    analysis = analyse(load_study(location), resamples=0)
    assert analysis.damaged
    out = write_report(analysis)
    folder = root / "quickstart" / "report"
    for name in ("report.html", "summary.md", "summary.json"):
        text = (folder / name).read_text()
        assert str(tmp_path) not in text, name
        assert f"{WORKLOAD}/8/2/measurements.csv" in text, name
    assert json.loads((folder / "summary.json").read_text())["location"] == WORKLOAD
    assert out["pages"]["html"] == (folder / "report.html").read_text()
    assert shown_location(analysis.study) == WORKLOAD
    assert print_stored_report(analysis.study.spec, StudyStore(str(root))) == EXIT_DAMAGED
    warning = capsys.readouterr().err.strip()
    assert warning.startswith(f"batchscale: warning: {root / WORKLOAD / '8' / '2' / 'measurements.csv'} ")


def test_a_bucket_keeps_its_url():
    from types import SimpleNamespace

    study = SimpleNamespace(location="gs://b/p/quickstart/mnist_5k/fc/sgd", spec=None)
    assert private_root(study) is None and shown_location(study) == study.location
