"""An experiment's comparison shown and written: comparison.html, comparison.md,
comparison.json, the Kubeflow metrics and the console's text.

The sections are defined once (``experiment_sections``): the findings first, then the
normalised overlay the paper draws (Figures 2-7), the raw overlay, each study's regime fit
with intervals, B*(D) on a data_size axis, the robustness tables when given, the table by
batch size and the notes. The overlays and the fit table are ``compare``'s
(``compare_pages``), not drawn or written again here.
"""

from __future__ import annotations

import json

from batchscale.analysis.figures.plots_robustness import ordinal
from batchscale.analysis.pages import html as H
from batchscale.analysis.pages.compare_pages import (
    CAPTIONS,
    FIGURE_EXAMPLES,
    FIGURE_NORMALIZED,
    FIGURE_STEPS,
    comparison_json,
    display_wide,
    fit_table,
    legend_line,
)
from batchscale.analysis.pages.critical_batch_size_page import b_star_line
from batchscale.analysis.pages.robustness_page import shown_table
from batchscale.analysis.pages.sections import (
    PAGES,
    Bullets,
    Figures,
    Notes,
    Paragraph,
    Section,
    Subheading,
    Table,
    render_console,
    render_html,
    render_markdown,
)
from batchscale.analysis.statistics.experiment_comparison import ExperimentComparison
from batchscale.analysis.statistics.intervals import regime_bound
from batchscale.core.experiment import AXIS_WORDS

FIGURE_B_STAR = "b_star_by_data_size.svg"
FIGURE_KTH_BEST = "compare_kth_best.svg"
CAPTION_KTH_BEST = ("Each study's steps to result by its best trial (solid) and by its {k} trial "
                    "(dashed, same colour): a curve that holds at the {k} trial does not rest on "
                    "one lucky trial. Bounds under early stopping are in the tables.")
CAPTION_B_STAR = ("The fitted critical batch size B* (S = 2 S_min on the study's fitted curve) of "
                  "each data size's study with its 95% bootstrap interval (an arrow: open on "
                  "that side), and the fitted B* = c·D^α (dashed).")
# a narrow console keeps B* and the perfect-scaling end, the quantities the findings compare
CONSOLE_LEAVE_OUT = ("goal", "max_useful_batch_size", "s_min", "perfect_scaling_end")
QUANTITIES = ("s_min", "b_star", "perfect_scaling_end", "max_useful_batch_size")


def _findings(result: ExperimentComparison) -> Section:
    items = [(("" if f.resolved or "not resolved" in f.sentence else "(not resolved) ") + f.sentence,)
             for f in result.findings]
    return Section("findings", "Findings", [
        Paragraph(f"{result.experiment.name} varies {AXIS_WORDS[result.experiment.axis.kind]} "
                  f"({result.experiment.axis.label}: "
                  f"{', '.join(str(v) for v in result.experiment.axis.values)})."
                  + (f" {result.experiment.description}" if result.experiment.description else "")),
        Bullets(items) if items else Paragraph("No finding: nothing to compare."),
        Paragraph(f"{result.resolved} of {len(result.findings)} findings are resolved by this "
                  "data; 95% bootstrap intervals; docs/experiments.md says how each is decided.",
                  note=True)])


def _figure(result: ExperimentComparison, name: str, caption: str) -> list:
    image = result.figures.get(name)
    return [Figures([(name, image, caption)], page="comparison.html")] if image else []


def _robustness(result: ExperimentComparison) -> Section | None:
    """The k-th best trial and the share reaching the goal per batch size, a table per study
    (``ExperimentComparison.robustness``, filled by the caller)."""
    if not result.robustness:
        return None
    k = result.experiment.robustness_k
    blocks = _figure(result, FIGURE_KTH_BEST, CAPTION_KTH_BEST.format(k=ordinal(k)))
    for study, frame in result.robustness.items():  # as a study's report shows it
        blocks += [Subheading(study), Table(shown_table(frame, k))]
    return Section("robustness", f"Robustness (k = {result.experiment.robustness_k})", blocks)


def experiment_sections(result: ExperimentComparison) -> list[Section]:
    comparison = result.comparison
    fits = fit_table(comparison)
    overlay = [*(_figure(result, FIGURE_NORMALIZED, CAPTIONS[FIGURE_NORMALIZED])),
               *(_figure(result, FIGURE_STEPS, CAPTIONS[FIGURE_STEPS])),
               *(_figure(result, FIGURE_EXAMPLES, CAPTIONS[FIGURE_EXAMPLES]))]
    sections = [_findings(result),
                Section("curves", "Steps to result", overlay, media=PAGES)]
    sections.append(Section("fits", "Regime fits (95% bootstrap intervals)",
                            [Table(fits, leave_out_first=CONSOLE_LEAVE_OUT),
                             Paragraph(b_star_line(), note=True)] if fits is not None else
                            [Paragraph("No study could be fitted (see the notes).")]))
    if result.exponent is not None:
        sections.append(Section("b_star_by_data_size", "B*(D)", [
            Paragraph(result.exponent.finding.sentence),
            *_figure(result, FIGURE_B_STAR, CAPTION_B_STAR)], media=PAGES))
    sections.append(_robustness(result))
    sections.append(Section("by_batch_size", "By batch size", [
        Table(display_wide(comparison)), Paragraph(f"{legend_line(comparison)}.", note=True)],
        media=PAGES))
    if comparison.notes:
        sections.append(Section("notes", "Notes", [Notes(comparison.notes)]))
    return [s for s in sections if s is not None]


def experiment_markdown(result: ExperimentComparison) -> str:
    lines = [f"# Experiment {result.experiment.name}", ""]
    lines += [line for s in experiment_sections(result) for line in render_markdown(s)]
    return result.comparison.without_roots("\n".join(lines))


def experiment_html(result: ExperimentComparison) -> str:
    body = "".join(piece for s in experiment_sections(result) for piece in render_html(s))
    title = f"Experiment {result.experiment.name}"
    return result.comparison.without_roots(H.page(f"batchscale: {title}",
                                                  f"<h1>{H.esc(title)}</h1>{body}"))


def format_experiment(result: ExperimentComparison, width: int | None = None) -> str:
    """The console's text: the findings' sentences, then each study's fit table (fitted to
    ``width`` characters; None: no limit)."""
    lines = []
    for section in experiment_sections(result):
        if section.id in ("findings", "fits", "notes", "robustness"):
            lines += render_console(section, width) + [""]
    return "\n".join(lines).rstrip() + "\n"


def experiment_json(result: ExperimentComparison) -> dict:
    """What comparison.json holds: the experiment, the findings, B*(D) and ``compare``'s
    JSON of the studies (their fits, the rows)."""
    return {"experiment": result.experiment.name, "axis": result.experiment.axis.to_dict(),
            "normalize_at": result.experiment.normalize_at,
            "findings": [f.to_dict() for f in result.findings],
            "b_star_exponent": result.exponent.to_dict() if result.exponent is not None else None,
            "robustness": {k: json.loads(v.to_json(orient="records"))
                           for k, v in result.robustness.items()},
            "comparison": comparison_json(result.comparison),
            "figures": list(result.figures)}


def experiment_metrics(result: ExperimentComparison) -> dict[str, float]:
    """Flat metrics for the Kubeflow UI: each curve's regime estimates as their notation
    shows them (``intervals.regime_bound``: an open end left out), α, and the count of
    findings and of resolved ones."""
    metrics = {"findings": float(len(result.findings)), "findings_resolved": float(result.resolved)}
    for curve in result.curves:
        if curve.fit is None or not curve.fit.fitted:
            continue
        for name in QUANTITIES:
            shown = regime_bound(getattr(curve.fit, name), steps=name == "s_min").numbers()
            for part, value in shown.items():
                metrics[f"{curve.name}/{name}" + ("" if part == "value" else f"/{part}")] = value
    if result.exponent is not None:
        for part, value in result.exponent.alpha.numbers().items():
            metrics["alpha" + ("" if part == "value" else f"/{part}")] = value
    return metrics


__all__ = ["FIGURE_B_STAR", "FIGURE_KTH_BEST", "experiment_html", "experiment_json", "experiment_markdown",
           "experiment_metrics", "experiment_sections", "format_experiment"]
