"""The report rendered for people: self-contained HTML, a Markdown summary, a terminal table.

The pages take a ``report.Analysis`` (not imported here: ``report`` imports this module to
write them) and read only its fields.
"""

from __future__ import annotations

import pandas as pd

from batchscale.analysis.figures.report_figures import TIME_FIGURES
from batchscale.analysis.pages import html as h
from batchscale.analysis.pages.answer_box import answer_html, answer_markdown
from batchscale.analysis.pages.protocol_pages import (
    early_stopping_html,
    early_stopping_markdown,
    protocol_methods,
    rounds_html,
    rounds_markdown,
)
from batchscale.analysis.pages.report_tables import TRIALS_FILE, budgets_html, budgets_markdown, trials_html
from batchscale.analysis.pages.time_pages import noise_scale_line, time_html, time_markdown
from batchscale.analysis.reading.censoring import early_stopping, protocol_label, stopping_goals
from batchscale.analysis.reading.completeness import (
    NO_CHECKPOINT,
    RESUME_HINT,
    unfinished_line,
    unfinished_table,
)
from batchscale.analysis.reading.locations import shown_location
from batchscale.analysis.reading.study_files import REMEDY, damaged_line
from batchscale.analysis.statistics.answer import answer
from batchscale.analysis.statistics.intervals import regime_text

DAMAGED_TITLE = "Damaged or unreadable files"

STEP_COLUMNS = ["batch_size", "steps_to_result", "censored", "examples_to_result", "reached",
                "complete", "infeasible", "best_trial", "learning_rate", "momentum",
                "effective_learning_rate"]

METHODS = (
    "Steps to result: per batch size, the earliest evaluation step at which any counted trial "
    "(status {counted}) strictly beat the goal, ties to the lower trial id, exactly as the "
    "paper's released analysis computes it. Regimes: S(B) = S_min (1 + B*/B) fitted by least "
    "squares on log steps to the steps-to-result curve. B* is the critical batch size "
    "(S = 2 S_min); perfect scaling ends where the local scaling efficiency "
    "−d log S / d log B = B*/(B + B*) falls to 0.8 (B = B*/4, steps 25% above perfect "
    "scaling); the maximum useful batch size is where S = 1.1 S_min (B = 10 B*). Intervals: "
    "{level:.0%} percentile bootstrap over {resamples} resamples of every batch size's trials; "
    "each resampled crossing is drawn within its evaluation interval, and the best-of-n "
    "overshoot the bootstrap cannot see is added back from the gaps between the best trials.")


def regimes_table(fits: dict) -> pd.DataFrame:
    """One row per goal, each estimate in the one notation (``intervals.regime_text``,
    short: the notes below the table say why a bound is one-sided)."""
    rows = []
    for label, fit in fits.items():
        if not fit.fitted:
            rows.append({"goal": label, "S_min": "—", "B*": "—", "perfect scaling ends": "—",
                         "max useful batch size": "—", "fit": fit.reason})
            continue

        def text(est, steps=False, fit=fit):
            return regime_text(est, fit.batch_sizes, steps, fit.level, short=True)
        rows.append({"goal": label, "S_min": text(fit.s_min, steps=True), "B*": text(fit.b_star),
                     "perfect scaling ends": text(fit.perfect_scaling_end),
                     "max useful batch size": text(fit.max_useful_batch_size),
                     "fit": f"{len(fit.batch_sizes)} batch sizes ({min(fit.batch_sizes)}–"
                            f"{max(fit.batch_sizes)})"})
    return pd.DataFrame(rows)


def _predicted(analysis) -> list[str]:
    """The plan's predicted B_simple beside the fitted B* (first goal), when plan.json exists."""
    line = noise_scale_line(getattr(analysis, "predicted_noise_scale", None))
    return [f"{analysis.study.goals[0].label}: {line}"] if line else []


def _level(analysis) -> tuple[float, int]:
    fitted = [f for f in analysis.fits.values() if f.fitted]
    return (fitted[0].level, fitted[0].resamples) if fitted else (0.95, 0)


def _methods(analysis, level: float, resamples: int) -> str:
    text = METHODS.format(counted="/".join(analysis.study.counted), level=level,
                          resamples=resamples)
    return f"{text} {protocol_methods(analysis)}".strip()


def _stopped_at(analysis) -> str:
    """", which stopped trials at G" when the goals analysed are not the ones the trials
    were stopped at (a --goal on an early-stopping study)."""
    own = stopping_goals(analysis.study)
    if not early_stopping(analysis.protocol) or not own or set(own) == set(analysis.study.goals):
        return ""
    return f", which stopped trials at {', '.join(g.label for g in own)}"


def _intro(analysis) -> str:
    study = analysis.study
    per_batch = analysis.counts["trials"]
    if study.batch_sizes:
        low, high = per_batch.min(), per_batch.max()
        trials = f"{low}–{high}" if low != high else f"{low}"
        sizes = (f"{len(study.batch_sizes)} batch sizes ({min(study.batch_sizes)}–"
                 f"{max(study.batch_sizes)}), {trials} trials each")
    else:
        sizes = "no trials yet"  # every pack task failed before its first trial was written
    return (f"{study.dataset} / {study.model} / {study.optimizer}; {sizes}; "
            f"goals {', '.join(g.label for g in study.goals)}; "
            f"protocol {protocol_label(analysis.protocol)}"
            f"{_stopped_at(analysis)}; "
            f"counted statuses {'/'.join(study.counted)}; read from {shown_location(study)} "
            f"({study.layout} layout).")


def _damaged(analysis) -> list[str]:
    """Notes on checkpoints that exist but give no step to resume from (damaged ones)."""
    return [f"batch size {u.batch_size}, trial {u.trial_id}: {u.note}"
            for u in analysis.unfinished if u.resume_step is None and u.note != NO_CHECKPOINT]


def damaged_html(analysis) -> list[str]:
    """The "Damaged or unreadable files" section: one warning per file (none: nothing)."""
    if not analysis.damaged:
        return []
    return [f'<h2 id="damaged">{DAMAGED_TITLE}</h2>', h.warnings([damaged_line(analysis.damaged)]),
            "<ul>", *(f"<li><code>{h.esc(d.file)}</code> {h.esc(d.problem)}; "
                      f"{h.esc(d.left_out)}</li>" for d in analysis.damaged),
            "</ul>", f'<p class="note">{h.esc(REMEDY[0].upper() + REMEDY[1:])}.</p>']


def damaged_markdown(analysis) -> list[str]:
    if not analysis.damaged:
        return []
    return [f"## {DAMAGED_TITLE}", "", f"**{damaged_line(analysis.damaged)}**", "",
            *(f"- `{d.file}` {d.problem}; {d.left_out}" for d in analysis.damaged), "",
            f"{REMEDY[0].upper() + REMEDY[1:]}.", ""]


def unfinished_html(analysis) -> list[str]:
    """The "Unfinished trials" section (our studies only), or one line when all are done."""
    if analysis.expected_trials is None:
        return []
    line = unfinished_line(analysis.unfinished, analysis.expected_trials)
    if not analysis.unfinished:
        return [f'<p class="note">{h.esc(line)}</p>']
    return ['<h2 id="unfinished">Unfinished trials</h2>', h.warnings([line]),
            h.table(unfinished_table(analysis.unfinished)),
            *(f'<p class="note">{h.esc(d)}</p>' for d in _damaged(analysis)),
            f"<p>To finish them, {h.esc(RESUME_HINT)}.</p>"]


def unfinished_markdown(analysis) -> list[str]:
    if analysis.expected_trials is None:
        return []
    line = unfinished_line(analysis.unfinished, analysis.expected_trials)
    if not analysis.unfinished:
        return [line, ""]
    return ["## Unfinished trials", "", f"**{line}**", "",
            *h.markdown_table(unfinished_table(analysis.unfinished)), "",
            *(f"- {d}" for d in _damaged(analysis)), *([""] if _damaged(analysis) else []),
            f"To finish them, {RESUME_HINT}.", ""]


def report_html(analysis) -> str:
    """report.html: the answer first, then the contents, then every section (each ``<h2>``
    with an id, which the contents link to)."""
    study, steps = analysis.study, analysis.steps
    level, resamples = _level(analysis)
    body = [f'<p class="note">{h.esc(_intro(analysis))}</p>',
            *damaged_html(analysis), *unfinished_html(analysis), *early_stopping_html(analysis),
            h.heading("Regimes", "regimes"), h.table(regimes_table(analysis.fits)),
            *(f"<p>{h.esc(line)}</p>" for line in _predicted(analysis)),
            "".join(f'<p class="note">{h.esc(n)}</p>' for n in analysis.notes)]
    if analysis.warnings:
        body += [h.heading("Search-space warnings", "search-space-warnings"),
                 h.warnings([w["message"] for w in analysis.warnings])]
    body += [*time_html(analysis), h.heading("Figures", "figures")]
    body += [h.figure(png, caption, alt=name) for name, (png, caption) in analysis.figures.items()
             if name not in TIME_FIGURES]
    for split, title in (("val", "Steps to result (validation)"), ("train", "Steps to result (training)")):
        groups = steps[steps["split"] == split].groupby("goal", sort=False)
        for k, (goal, group) in enumerate(groups, 1):
            body += [h.heading(f"{title}: {goal}", f"steps-{split}-{k}"), h.table(group, STEP_COLUMNS)]
    body += [h.heading("Trials per batch size", "trial-counts"), h.table(analysis.counts),
             *rounds_html(analysis), h.heading("Optimal metaparameters", "metaparameters"),
             h.table(analysis.optimal), *budgets_html(analysis), *trials_html(analysis),
             h.heading("Methods", "methods"),
             f'<p class="note">{h.esc(_methods(analysis, level, resamples))}</p>']
    sections = "\n".join(body)
    top = [f"<h1>{h.esc(study.title)}</h1>", answer_html(answer(analysis)), h.contents(sections)]
    return h.page(f"batchscale: {study.name}", "\n".join([*top, sections]))


def report_markdown(analysis) -> str:
    """summary.md: the answer first, then the sections of report.html without its figures
    and its table of every trial (trials.csv)."""
    study, steps = analysis.study, analysis.steps
    level, resamples = _level(analysis)
    lines = [f"# {study.title}", "", *answer_markdown(answer(analysis)), _intro(analysis), "",
             *damaged_markdown(analysis), *unfinished_markdown(analysis),
             *early_stopping_markdown(analysis), "## Regimes", "",
             *h.markdown_table(regimes_table(analysis.fits)), "",
             *(f"{line}\n" for line in _predicted(analysis))]
    lines += [f"- {n}" for n in analysis.notes]
    if analysis.warnings:
        lines += ["", "## Search-space warnings", "", *[f"- {w['message']}" for w in analysis.warnings]]
    lines += ["", *time_markdown(analysis)]
    for split, title in (("val", "validation"), ("train", "training")):
        for goal, group in steps[steps["split"] == split].groupby("goal", sort=False):
            lines += ["", f"## Steps to result, {title} {goal}", "", *h.markdown_table(group, STEP_COLUMNS)]
    lines += ["", "## Trials per batch size", "", *h.markdown_table(analysis.counts), "",
              *rounds_markdown(analysis), *budgets_markdown(analysis),
              f"Every trial ({len(study.trials)}): {TRIALS_FILE} (a sortable table in report.html).",
              "", "## Methods", "", _methods(analysis, level, resamples), "",
              "Figures: " + ", ".join(n for n in analysis.figures if n not in TIME_FIGURES)
              + " (embedded in report.html).", ""]
    return "\n".join(lines)


def format_table(summary: pd.DataFrame) -> str:
    """A plain-text table per goal and split, for the terminal (a steps_to_result.csv
    written before a column existed shows without it)."""
    out = []
    columns = [c for c in STEP_COLUMNS if c in summary]
    if "censored" in summary:
        summary = summary.assign(censored=summary["censored"].fillna(""))
    for (goal, split), group in summary.groupby(["goal", "split"], sort=False):
        out.append(f"goal {goal} ({split})")
        rows = [[h.fmt(v) for v in r] for r in group[columns].itertuples(index=False)]
        widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
        out.append("  ".join(c.rjust(w) for c, w in zip(columns, widths)))
        out += ["  ".join(v.rjust(w) for v, w in zip(r, widths)) for r in rows]
    return "\n".join(out)
