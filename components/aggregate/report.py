"""aggregate: turn a study's goal table into tables, figures and a self-contained report.

Outputs under ``<study>/report/`` in the store: steps_to_result.csv, summary.json,
summary.md, report.html (figures embedded as data: URIs, so it opens without a server)
and the figures as PNG files.
"""

from __future__ import annotations

import base64
import html
import json
import math

import pandas as pd

from components.aggregate.plots import best_trial_curves_plot, steps_to_result_plot
from components.aggregate.steps import steps_to_result
from components.goal_detection.detect import detect_study_goals
from components.spec import StudySpec
from components.store import StudyStore, load_trials

TABLE_COLUMNS = ["batch_size", "steps_to_result", "examples_to_result", "reached", "complete",
                 "infeasible", "best_trial", "learning_rate", "momentum", "effective_learning_rate"]


def build_report(spec: StudySpec, store: StudyStore, goal_steps: pd.DataFrame | None = None) -> dict:
    """Compute and write the report; returns {summary, markdown, html, paths}."""
    if goal_steps is None:
        goal_steps = detect_study_goals(spec, store)
    summary = steps_to_result(goal_steps, "val")
    train_summary = steps_to_result(goal_steps, "train")
    title = f"{spec.name}: {spec.workload.dataset} / {spec.workload.model} / {spec.workload.optimizer}"
    figures = {"steps_to_result.png": steps_to_result_plot(summary, title)}
    first = spec.goals[0]
    curves = _best_curves(store, spec, summary[summary["goal"] == first.label])
    if curves:
        figures["best_trial_curves.png"] = best_trial_curves_plot(
            curves, first.metric, first.value, f"best trial per batch size ({first.label})")
    markdown = summary_markdown(spec, summary, train_summary)
    page = summary_html(spec, summary, train_summary, figures)
    doc = summary_json(spec, summary, train_summary)

    base = f"{spec.name}/report"
    store.fs.write_text(f"{base}/steps_to_result.csv",
                        pd.concat([summary, train_summary]).to_csv(index=False))
    store.fs.write_text(f"{base}/summary.json", json.dumps(doc, indent=2))
    store.fs.write_text(f"{base}/summary.md", markdown)
    store.fs.write_text(f"{base}/report.html", page)
    for name, png in figures.items():
        store.fs.write_bytes(f"{base}/{name}", png)
    return {"summary": summary, "train_summary": train_summary, "markdown": markdown,
            "html": page, "json": doc, "report_url": store.url(f"{base}/report.html")}


def _best_curves(store, spec, summary) -> dict[int, pd.DataFrame]:
    best = {int(r.batch_size): int(r.best_trial) for r in summary.itertuples()
            if r.best_trial is not None and not pd.isna(r.best_trial)}
    curves = {}
    for trial in load_trials(store.fs, spec.name):
        if best.get(trial["batch_size"]) == trial["trial_id"] and trial["measurements"]:
            curves[trial["batch_size"]] = pd.DataFrame(trial["measurements"])
    return curves


def _fmt(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def format_table(summary: pd.DataFrame) -> str:
    """A plain-text table per goal, for the terminal."""
    out = []
    for goal, group in summary.groupby("goal", sort=False):
        out.append(f"goal {goal} ({group['split'].iloc[0]})")
        rows = [[_fmt(v) for v in r] for r in group[TABLE_COLUMNS].itertuples(index=False)]
        widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(TABLE_COLUMNS)]
        out.append("  ".join(c.rjust(w) for c, w in zip(TABLE_COLUMNS, widths)))
        out += ["  ".join(v.rjust(w) for v, w in zip(r, widths)) for r in rows]
    return "\n".join(out)


def _markdown_table(summary: pd.DataFrame) -> list[str]:
    lines = ["| " + " | ".join(TABLE_COLUMNS) + " |", "|" + "---|" * len(TABLE_COLUMNS)]
    lines += ["| " + " | ".join(_fmt(v) for v in r) + " |"
              for r in summary[TABLE_COLUMNS].itertuples(index=False)]
    return lines


def summary_markdown(spec, summary, train_summary) -> str:
    lines = [f"# Study {spec.name}", "",
             f"Workload: {spec.workload.dataset} / {spec.workload.model} / "
             f"{spec.workload.optimizer}, {spec.trials_per_batch_size} trials per batch size, "
             f"schedule {spec.schedule}.", ""]
    for goal, group in summary.groupby("goal", sort=False):
        lines += [f"## Steps to result, validation {goal}", "", *_markdown_table(group), ""]
    for goal, group in train_summary.groupby("goal", sort=False):
        lines += [f"## Steps to result, training {goal}", "", *_markdown_table(group), ""]
    return "\n".join(lines)


def summary_json(spec, summary, train_summary) -> dict:
    def records(df):
        return json.loads(df.to_json(orient="records"))

    return {"study": spec.name, "workload": spec.to_dict()["workload"],
            "goals": [g.label for g in spec.goals], "validation": records(summary),
            "training": records(train_summary)}


def summary_html(spec, summary, train_summary, figures: dict[str, bytes]) -> str:
    """One HTML file with every figure inline (data: URIs) and the tables."""
    def table(df):
        head = "".join(f"<th>{html.escape(c)}</th>" for c in TABLE_COLUMNS)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(v))}</td>" for v in r) + "</tr>"
                       for r in df[TABLE_COLUMNS].itertuples(index=False))
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    imgs = "".join(
        f'<figure><img alt="{html.escape(name)}" src="data:image/png;base64,'
        f'{base64.b64encode(png).decode()}"><figcaption>{html.escape(name)}</figcaption></figure>'
        for name, png in figures.items())
    sections = "".join(f"<h2>Validation: {html.escape(g)}</h2>{table(df)}"
                       for g, df in summary.groupby("goal", sort=False))
    sections += "".join(f"<h2>Training: {html.escape(g)}</h2>{table(df)}"
                        for g, df in train_summary.groupby("goal", sort=False))
    w = spec.workload
    n = spec.evaluation.train_examples
    train_note = f"a fixed subset of {n} training examples" if n else "the whole training split"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>batchscale: {html.escape(spec.name)}</title>
<style>body{{font-family:sans-serif;max-width:1000px;margin:2em auto;color:#222}}
table{{border-collapse:collapse;font-size:13px}}
td,th{{border:1px solid #ccc;padding:3px 7px;text-align:right}}
figure{{display:inline-block;margin:0 1em 1em 0}}img{{max-width:470px}}</style></head>
<body><h1>Study {html.escape(spec.name)}</h1>
<p>{html.escape(w.dataset)} / {html.escape(w.model)} / {html.escape(w.optimizer)};
{spec.trials_per_batch_size} trials per batch size; schedule {html.escape(spec.schedule)};
steps to result = the earliest evaluation step at which a COMPLETE trial strictly beat the goal
(evaluation grid resolution {spec.evaluation.resolution:.0%}).
Training metrics are measured on {train_note}; trials stop once they beat the validation
goals, so the training table only sees training goals reached before that.</p>
{imgs}{sections}</body></html>
"""
