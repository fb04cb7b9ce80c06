"""The report's "Metaparameters against batch size" section: every law fitted to the best
metaparameters (``statistics.metaparameter_law_fits``), the chosen one per parameter, and
the search boxes they propose for the next batch size up and down, with the figure.
"""

from __future__ import annotations

import math

import pandas as pd

from batchscale.analysis.figures.plots_laws import LAWS_FIGURE
from batchscale.analysis.pages.sections import PAGES, Figures, Notes, Paragraph, Section, Subheading, Table
from batchscale.analysis.statistics.metaparameter_law_fits import NEAR_BEST, MetaparameterLaws
from batchscale.analysis.statistics.metaparameters import fmt_value
from batchscale.analysis.statistics.study_analysis import Analysis
from batchscale.search.metaparameter_laws import EFFECTIVE, MIN_WIDTH_SHARE, SIMPLER_WITHIN

TITLE = "Metaparameters against batch size"
EXPLAINED = (
    "The first goal's best trial per batch size, its searched metaparameters fitted against "
    "batch size B in log units (1 − γ for a momentum or β): constant, linear (∝ B), square "
    "root (∝ √B), a free power B^α and saturating v_max·B/(B + B_s) for learning rates; "
    "constant and power for the others. Where momentum was searched, the learning-rate law "
    "the box uses is that of the effective learning rate η/(1−γ) (η and γ trade off along "
    "it; the paper's Figures 8, 9). Miss: the leave-one-out root mean square error, as the "
    "factor a law typically misses a batch size it was not fitted on by; the chosen law has "
    "the smallest, unless a form with fewer parameters is within {within:.0%} of it or "
    "inside the winner's interval. Intervals are {level:.0%}, with Student's t; the noise is "
    "the residuals' or, where larger, the spread of the trials within {near:.0%} of the best "
    "trial's steps (near-best: how flat the optimum is).")
BOX_RULE = (
    "Proposed box: each fitted parameter's range centred on its chosen law's prediction for "
    "that batch size, as wide as the {level:.0%} prediction interval but at least {share:.0%} "
    "and at most all of the searched range's width (in its scale), clipped to the "
    "parameter's limits; a learning rate with momentum sits at the effective rate's "
    "prediction times 1 − the predicted momentum. Other parameters keep their range.")


def fits_table(laws: MetaparameterLaws) -> pd.DataFrame:
    """One row per parameter and form: the law, coefficients [interval], miss, chosen."""
    rows = []
    for name, fits in laws.fits.items():
        for law in fits:
            ends = law.coefficient_intervals(laws.level)
            coefficients = "; ".join(
                f"{k} = {fmt_value(v)} [{fmt_value(ends[k][0])}, {fmt_value(ends[k][1])}]"
                for k, v in law.coefficients.items())
            rows.append({"parameter": law.quantity, "form": law.form, "law": law.equation,
                         f"coefficients [{laws.level:.0%}]": coefficients,
                         "miss (×)": f"{math.exp(law.goodness):.2f}", "noise": law.noise,
                         "chosen": "✓" if laws.chosen.get(name) is law else ""})
    return pd.DataFrame(rows)


def boxes_table(laws: MetaparameterLaws) -> pd.DataFrame:
    """One row per proposed batch size and continuous parameter: searched and proposed."""
    rows = []
    for b, box, _why in laws.boxes:
        for old, new in zip(laws.space, box):
            if old.values is not None:
                continue
            rows.append({"batch_size": b, "parameter": old.name, "scale": old.scale,
                         "searched range": _range(old), "proposed range": _range(new),
                         "moved": "" if _range(new) == _range(old) else "✓"})
    return pd.DataFrame(rows)


def _range(p) -> str:
    return f"[{fmt_value(p.min)}, {fmt_value(p.max)}]"


def summary_line(laws: MetaparameterLaws) -> str:
    """One sentence: the chosen law of each parameter, from which batch sizes."""
    sizes = laws.points["batch_size"]
    order = sorted(laws.chosen, key=lambda n: (n not in ("learning_rate", EFFECTIVE), n))
    return (f"Chosen laws from batch sizes {int(sizes.min())}–{int(sizes.max())} "
            f"({len(sizes)} points): " + "; ".join(laws.chosen[n].equation for n in order) + "."
            + (" The proposed boxes' learning rate follows the effective learning rate's law."
               if EFFECTIVE in laws.chosen and any(p.name == "learning_rate" for p in laws.space)
               else ""))


def laws_section(analysis: Analysis) -> Section | None:
    """The section (None: not computed)."""
    return section_of(analysis.laws, analysis.figures.get(LAWS_FIGURE))


def section_of(laws: MetaparameterLaws | None, figure: tuple[bytes, str] | None) -> Section | None:
    """The section of ``laws`` with its ``figure`` (SVG, caption), if drawn."""
    if laws is None:
        return None
    if not laws.fitted:
        return Section("metaparameter-laws", TITLE,
                       [Paragraph(f"No metaparameter laws: {laws.reason}.", note=True)])
    blocks = [Paragraph(summary_line(laws)),
              Paragraph(EXPLAINED.format(within=SIMPLER_WITHIN - 1, level=laws.level,
                                         near=NEAR_BEST), note=True),
              Table(fits_table(laws), leave_out_first=("noise", f"coefficients [{laws.level:.0%}]")),
              Notes(laws.notes)]
    if laws.boxes:
        blocks += [Subheading("Proposed search boxes"), Table(boxes_table(laws)),
                   Notes([why for _b, _box, why in laws.boxes]),
                   Paragraph(BOX_RULE.format(level=laws.level, share=MIN_WIDTH_SHARE), note=True)]
    if figure is not None:
        blocks.append(Figures([(LAWS_FIGURE, figure[0], figure[1])], media=PAGES))
    return Section("metaparameter-laws", TITLE, blocks)
