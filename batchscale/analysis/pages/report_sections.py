"""The sections of the study report, each defined once (``sections.Section``), from top
to bottom: the intro, damaged files, unfinished trials, regimes, search-space warnings,
figures, steps to result per goal, trials per batch size, optimal metaparameters and the
methods. The sections on early stopping and search rounds are in ``protocol_pages``, time
and cost in ``time_pages``, budgets and every trial in ``report_tables``;
``report_pages`` puts them in order and renders them.
"""

from __future__ import annotations

import pandas as pd

from batchscale.analysis.figures.plots_laws import LAWS_FIGURE
from batchscale.analysis.figures.plots_robustness import ROBUSTNESS_FIGURE
from batchscale.analysis.figures.report_figures import TIME_FIGURES
from batchscale.analysis.pages.protocol_pages import protocol_methods
from batchscale.analysis.pages.sections import (
    HTML,
    MARKDOWN,
    Bullets,
    Code,
    Figures,
    Notes,
    Paragraph,
    Section,
    Table,
    Warnings,
)
from batchscale.analysis.pages.time_pages import noise_scale_line
from batchscale.analysis.reading.censoring import early_stopping, protocol_label, stopping_goals
from batchscale.analysis.reading.completeness import (
    NO_CHECKPOINT,
    RESUME_HINT,
    unfinished_line,
    unfinished_table,
)
from batchscale.analysis.reading.locations import shown_location
from batchscale.analysis.reading.study_files import REMEDY, damaged_line
from batchscale.analysis.statistics.intervals import regime_text
from batchscale.analysis.statistics.regimes import RegimeFit
from batchscale.analysis.statistics.study_analysis import Analysis
from batchscale.core.names import EFFECTIVE_LEARNING_RATE

DAMAGED_TITLE = "Damaged or unreadable files"

STEP_COLUMNS = ["batch_size", "steps_to_result", "censored", "examples_to_result", "reached",
                "complete", "infeasible", "best_trial", "learning_rate", "momentum",
                "effective_learning_rate"]
OWN_COLUMNS = ("beta_1", "beta_2", "epsilon", "weight_decay")  # the Adam family's, in momentum's place
# What a narrow terminal leaves out first (``console_tables.fit_table``): what the other
# columns imply (examples = steps x batch size) or the report's counts section repeats;
# then columns go from the right end.
STEP_COLUMNS_LEFT_OUT_FIRST = ("examples_to_result", "complete", "infeasible", "reached")

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


def regimes_table(fits: dict[str, RegimeFit]) -> pd.DataFrame:
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


def _predicted(analysis: Analysis) -> list[str]:
    """The plan's predicted B_simple beside the fitted B* (first goal), when plan.json exists."""
    line = noise_scale_line(analysis.predicted_noise_scale)
    return [f"{analysis.study.goals[0].label}: {line}"] if line else []


def _level(analysis: Analysis) -> tuple[float, int]:
    fitted = [f for f in analysis.fits.values() if f.fitted]
    return (fitted[0].level, fitted[0].resamples) if fitted else (0.95, 0)


def step_columns(summary: pd.DataFrame) -> list[str]:
    """``STEP_COLUMNS`` as a steps table of this study has them: an Adam-family study's
    own metaparameters (``steps.optimizer_columns``) in momentum's place, and no momentum
    column where no trial has one."""
    own = [c for c in OWN_COLUMNS if c in summary]
    columns = [c for n in STEP_COLUMNS for c in (own if own and n == "momentum" else [n])]
    if "momentum" in columns and "momentum" in summary and summary["momentum"].isna().all():
        columns.remove("momentum")  # plain SGD, or an Adam study searching none of its own
    return [c for c in columns if c in summary]


def effective_text(optimizer: str | None) -> str:
    """The methods' sentence saying which effective learning rate the report shows."""
    symbol = EFFECTIVE_LEARNING_RATE.get(optimizer, "η/(1−γ)")
    if symbol != "η":
        return ("Effective learning rate: η/(1−γ), the paper's (Section 2.2): the step a momentum "
                "optimizer settles to under a constant gradient.")
    if optimizer == "sgd":
        return "Effective learning rate: η itself (plain SGD, γ = 0)."
    return (f"Effective learning rate: η itself, for {optimizer} as for the Adam family: its first "
            "moment is an average, (1 − β₁) Σ β₁^k g, not momentum's sum, so it does not scale "
            "the step by 1/(1 − β₁); β₁ is shown where a momentum study shows γ.")


def _methods(analysis: Analysis, level: float, resamples: int) -> str:
    text = METHODS.format(counted="/".join(analysis.study.counted), level=level,
                          resamples=resamples)
    return f"{text} {effective_text(analysis.study.optimizer)} {protocol_methods(analysis)}".strip()


def _stopped_at(analysis: Analysis) -> str:
    """", which stopped trials at G" when the goals analysed are not the ones the trials
    were stopped at (a --goal on an early-stopping study)."""
    own = stopping_goals(analysis.study)
    if not early_stopping(analysis.protocol) or not own or set(own) == set(analysis.study.goals):
        return ""
    return f", which stopped trials at {', '.join(g.label for g in own)}"


def _intro(analysis: Analysis) -> str:
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


def _damaged(analysis: Analysis) -> list[str]:
    """Notes on checkpoints that exist but give no step to resume from (damaged ones)."""
    return [f"batch size {u.batch_size}, trial {u.trial_id}: {u.note}"
            for u in analysis.unfinished if u.resume_step is None and u.note != NO_CHECKPOINT]


def intro_section(analysis: Analysis) -> Section:
    """One line: the workload, batch sizes, goals, protocol and where it was read from."""
    return Section(None, None, [Paragraph(_intro(analysis), note=True)])


def damaged_section(analysis: Analysis) -> Section | None:
    """"Damaged or unreadable files": one warning, then each file (none: no section)."""
    if not analysis.damaged:
        return None
    return Section("damaged", DAMAGED_TITLE, [
        Warnings([damaged_line(analysis.damaged)], paragraph=True),
        Bullets([(Code(d.file), f" {d.problem}; {d.left_out}") for d in analysis.damaged]),
        Paragraph(f"{REMEDY[0].upper() + REMEDY[1:]}.", note=True)])


def unfinished_section(analysis: Analysis) -> Section | None:
    """"Unfinished trials" (our studies only), or one line when all are done."""
    if analysis.expected_trials is None:
        return None
    line = unfinished_line(analysis.unfinished, analysis.expected_trials)
    if not analysis.unfinished:
        return Section(None, None, [Paragraph(line, note=True)])
    return Section("unfinished", "Unfinished trials", [
        Warnings([line], paragraph=True), Table(unfinished_table(analysis.unfinished)),
        Notes(_damaged(analysis)), Paragraph(f"To finish them, {RESUME_HINT}.")])


def regimes_section(analysis: Analysis) -> Section:
    """"Regimes": one row per goal, the plan's prediction beside B*, the fits' caveats."""
    return Section("regimes", "Regimes", [
        Table(regimes_table(analysis.fits)), *(Paragraph(line) for line in _predicted(analysis)),
        Notes(analysis.notes)])


def search_space_section(analysis: Analysis) -> Section | None:
    if not analysis.warnings:
        return None
    return Section("search-space-warnings", "Search-space warnings",
                   [Warnings([w["message"] for w in analysis.warnings])])


def _figures(analysis: Analysis) -> Figures:
    return Figures([(name, image, caption) for name, (image, caption) in analysis.figures.items()
                    if name not in (*TIME_FIGURES, ROBUSTNESS_FIGURE, LAWS_FIGURE)])


def figures_section(analysis: Analysis) -> Section:
    """Every figure but time and cost's and robustness' (in their own sections), embedded
    (report.html only; summary.md names them at its end, ``methods_section``)."""
    return Section("figures", "Figures", [_figures(analysis)], media=(HTML,))


def steps_sections(analysis: Analysis) -> list[Section]:
    """One table of steps to result per goal, validation first, then training."""
    steps, out = analysis.steps, []
    for split, title in (("val", "validation"), ("train", "training")):
        groups = steps[steps["split"] == split].groupby("goal", sort=False)
        out += [Section(f"steps-{split}-{k}", f"Steps to result ({title}): {goal}",
                        [Table(group, step_columns(group))])
                for k, (goal, group) in enumerate(groups, 1)]
    return out


def counts_section(analysis: Analysis) -> Section:
    return Section("trial-counts", "Trials per batch size", [Table(analysis.counts)])


def metaparameters_section(analysis: Analysis) -> Section:
    """The best trial's metaparameters per batch size (report.html; metaparameters.csv)."""
    return Section("metaparameters", "Optimal metaparameters", [Table(analysis.optimal)],
                   media=(HTML,))


def methods_section(analysis: Analysis) -> Section:
    level, resamples = _level(analysis)
    return Section("methods", "Methods", [Paragraph(_methods(analysis, level, resamples), note=True),
                                          Figures(_figures(analysis).items, media=(MARKDOWN,))])
