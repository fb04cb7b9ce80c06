"""A comparison of studies shown and written: terminal text, compare.html, compare.md,
compare.csv and compare.json.

Every function takes a ``statistics.comparison.Comparison`` and reads only its fields;
the page's sections are defined once (``comparison_sections``) for compare.html and
compare.md, and the terminal text is rendered from the same blocks. ``write_comparison``
writes those files and the figures into a local folder or gs:// prefix, and nothing else.
The terminal names each study where it was read from; the files, which travel, name no
path of this machine: a local study relative to its store root (``reading.locations``).
"""

from __future__ import annotations

import json

import pandas as pd

from batchscale.analysis.figures.plots import STEPS
from batchscale.analysis.pages import html as H
from batchscale.analysis.pages.critical_batch_size_page import b_star_line
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
    render_console,
    render_html,
    render_markdown,
)
from batchscale.analysis.statistics.censoring_notes import SPLIT_NAMES
from batchscale.analysis.statistics.comparison import Comparison
from batchscale.analysis.statistics.intervals import regime_text
from batchscale.store.filesystem import open_root

NORMALIZED = f"normalized_{STEPS}"
FIGURE_STEPS = "compare_steps.svg"
FIGURE_NORMALIZED = "compare_steps_normalized.svg"
FIGURE_EXAMPLES = "compare_examples.svg"
OUTPUT_FILES = ("compare.html", "compare.md", "compare.csv", "compare.json",
                FIGURE_STEPS, FIGURE_NORMALIZED, FIGURE_EXAMPLES)
TITLE = "Comparison of steps to result"


def _value_text(table: pd.DataFrame, entry, batch_size: int, normalizing: bool) -> str:
    row = table[(table["study"] == entry.study) & (table["batch_size"] == batch_size)]
    if row.empty:
        return ""  # not measured
    if normalizing and not entry.normalized:
        return "n/a"
    return H.fmt(float(row[NORMALIZED if normalizing else STEPS].iloc[0]))


def _display_wide(result: Comparison) -> pd.DataFrame:
    """batch size x study (a column per study, headed by its name, made unique by
    ``compare.disambiguate``) of the plotted values as text: "—" not reached, "" not
    measured, "n/a" a study left out of the normalisation."""
    normalizing = result.normalize_at is not None
    table = result.table
    sizes = sorted({int(b) for b in table["batch_size"]})
    rows = {"batch_size": [str(b) for b in sizes]}
    for entry in result.studies:
        rows[entry.study] = [_value_text(table, entry, b, normalizing) for b in sizes]
    return pd.DataFrame(rows)


def _legend_line(result: Comparison) -> str:
    text = "— not reached; blank: batch size not measured"
    if result.normalize_at is not None:
        text += "; n/a: left out of the normalisation (see the notes)"
    return text


def _what(result: Comparison) -> str:
    what = f"{SPLIT_NAMES[result.split]} steps to result"
    if result.normalize_at is not None:
        what += f", normalised to 1 at batch size {result.normalize_at}"
    return what


def format_comparison(result: Comparison) -> str:
    """Plain text for the terminal: a legend of the studies, then batch size rows x study
    columns of steps to result (normalised when asked), then the notes."""
    return "\n".join(render_console(Section(None, f"{_what(result)}:", [
        _studies(result, local=True), Table(_display_wide(result)),
        Paragraph(f"({_legend_line(result)})"), Notes(result.notes)])))


def _study_lines(result: Comparison, local: bool) -> list[tuple[str, str, str]]:
    """(study name as the columns head it, its goal, where it was read from: on this
    machine when ``local``, else as the files name it)."""
    return [(e.study, e.goal, e.location if local else e.shown_location) for e in result.studies]


def _fit_table(result: Comparison) -> pd.DataFrame | None:
    rows = []
    for e in result.studies:
        if e.fit is None or not e.fit.fitted:
            continue
        row = {"study": e.study, "goal": e.goal}
        for key in ("s_min", "b_star", "perfect_scaling_end", "max_useful_batch_size"):
            row[key] = regime_text(getattr(e.fit, key), e.fit.batch_sizes, key == "s_min",
                                   e.fit.level, short=True)
        rows.append(row)
    return pd.DataFrame(rows) if rows else None


# public names for the experiment's comparison (``experiment_pages``), which shows the same
display_wide, legend_line, fit_table = _display_wide, _legend_line, _fit_table

CAPTIONS = {
    FIGURE_NORMALIZED: "Steps to result divided by each curve's steps at the reference batch size "
                       "(paper Figures 3–6); dashed: perfect scaling through the smallest batch "
                       "size that reached the goal.",
    FIGURE_STEPS: "Steps to result (paper Figures 15–17, Figure 1 style); dashed: perfect scaling "
                  "through the smallest batch size that reached the goal.",
    FIGURE_EXAMPLES: "Examples to result (steps × batch size); perfect scaling keeps it constant "
                     "(dashed).",
}


def _studies(result: Comparison, local: bool = False) -> Bullets:
    return Bullets([(f"{name}: {goal}, ", Code(location))
                    for name, goal, location in _study_lines(result, local)])


def comparison_sections(result: Comparison) -> list[Section]:
    """The comparison page's sections, defined once for compare.html and compare.md."""
    figures = [(name, image, CAPTIONS.get(name, name)) for name, image in result.figures.items()]
    fits = _fit_table(result)
    return [
        Section(None, None, [
            Paragraph(f"{_what(result)}. Steps to result: the earliest evaluation step at which a "
                      "counted trial strictly beat the goal.", note=True),
            _studies(result), Warnings(result.notes), Figures(figures, media=(HTML,))]),
        Section(None, "By batch size", [Table(_display_wide(result)),
                                        Paragraph(f"{_legend_line(result)}.", note=True)],
                heading_media=(HTML,)),
        *([Section(None, "Regime fits (95% bootstrap intervals)",
                   [Table(fits), Paragraph(b_star_line(), note=True)])]
          if fits is not None else []),
        Section(None, "All rows", [Table(result.table),
                                   Figures(figures, page="compare.html", media=(MARKDOWN,))]),
    ]


def comparison_markdown(result: Comparison) -> str:
    lines = [f"# {TITLE}", ""]
    lines += [line for s in comparison_sections(result) for line in render_markdown(s)]
    return result.without_roots("\n".join(lines))


def comparison_html(result: Comparison) -> str:
    body = "".join(piece for s in comparison_sections(result) for piece in render_html(s))
    return result.without_roots(H.page("batchscale: compare", f"<h1>{TITLE}</h1>{body}"))


def comparison_json(result: Comparison) -> dict:
    """What compare.json holds: the options, notes, studies, the table's rows and the figures
    (no local store root: the notes as the pages show them)."""
    records = json.loads(result.table.to_json(orient="records"))
    return {"goal": result.goal, "split": result.split, "normalize_at": result.normalize_at,
            "num_trials": result.num_trials, "notes": [result.without_roots(n) for n in result.notes],
            "studies": [s.to_dict() for s in result.studies], "rows": records,
            "figures": list(result.figures)}


def write_comparison(result: Comparison, out_url: str) -> dict[str, str]:
    """Write compare.html, compare.md, compare.csv, compare.json and the figures into
    ``out_url`` (a local folder, created if needed, or gs://bucket/prefix); other files
    there are left alone. Returns file name -> URL."""
    fs = open_root(out_url)
    texts = {"compare.html": comparison_html(result), "compare.md": comparison_markdown(result),
             "compare.csv": result.table.to_csv(index=False),
             "compare.json": result.without_roots(json.dumps(comparison_json(result), indent=2))}
    urls = {}
    for name, text in texts.items():
        fs.write_text(name, text)
        urls[name] = fs.url(name)
    for name, png in result.figures.items():
        if name not in OUTPUT_FILES:
            raise ValueError(f"compare: refusing to write unexpected file {name!r}")
        fs.write_bytes(name, png)
        urls[name] = fs.url(name)
    return urls
