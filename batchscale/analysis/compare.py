"""Compare steps to result across studies: the paper's Figures 3–6 (and 15–17) for any studies.

``compare_studies`` loads each location (one of our studies, or a workload of the paper's
released database; see ``loading.load_study``), computes steps to result for one goal per
study (the same goal string for all, or each study's first goal) and builds:

- a long table: one row per study and batch size (study, goal, split, batch_size, trials,
  reached, steps_to_result, examples_to_result, best_trial, and
  ``normalized_steps_to_result`` when ``normalize_at`` is given);
- overlay figures: steps to result (normalised at ``normalize_at`` when given, as in
  Figures 3–6, plus the raw curves as in Figures 15–17) and examples to result;
- notes: curves left out of the normalised comparison, studies without the goal's metric.

``write_comparison`` writes compare.html (self-contained), compare.md, compare.csv,
compare.json and the figures into a local folder or gs:// prefix, and nothing else.
"""

from __future__ import annotations

import json
import math

import pandas as pd

from batchscale.analysis import html as H
from batchscale.analysis.plots import EXAMPLES, STEPS, normalize_curves, steps_to_result_plot
from batchscale.analysis.steps import SPLITS, goal_column, steps_to_result
from batchscale.analysis.study_reader import load_study
from batchscale.core.goals import parse_goal
from batchscale.core.spec import SpecError
from batchscale.store.filesystem import open_root

TABLE_COLUMNS = ["study", "goal", "split", "batch_size", "trials", "reached", STEPS, EXAMPLES,
                 "best_trial"]
NORMALIZED = f"normalized_{STEPS}"
FIGURE_STEPS = "compare_steps.png"
FIGURE_NORMALIZED = "compare_steps_normalized.png"
FIGURE_EXAMPLES = "compare_examples.png"
OUTPUT_FILES = ("compare.html", "compare.md", "compare.csv", "compare.json",
                FIGURE_STEPS, FIGURE_NORMALIZED, FIGURE_EXAMPLES)
SPLIT_NAMES = {"val": "validation", "train": "training"}


def compare_studies(locations, goal: str | None = None, split: str | None = None,
                    normalize_at: int | None = None, num_trials: int | None = None,
                    fit: bool = False) -> dict:
    """Load and compare the studies at ``locations`` (local paths or gs:// URLs).

    ``goal``: a goal string (``batchscale.core.goals``: ``[SPLIT/]METRIC<VALUE`` or
    ``[SPLIT/]METRIC>VALUE``) used for every study; default: each study's first goal (its
    spec's, or the paper's Figure 1 goal). ``split``: the metric's split ("val" or "train";
    default: the goal's prefix, else "val"). ``normalize_at``: a batch size
    to normalise steps to result at (at least one study must have measured it).
    ``num_trials``: the first N trials per batch size (``load_study``). ``fit``: also fit
    S(B) = S_min (1 + B*/B) per study (``regimes.fit_regimes``) and draw it with its band.

    Returns a dict: goal, split, normalize_at, num_trials, studies (one dict per study:
    label, study, name, location, title, goal, batch_sizes, fit), table (long DataFrame,
    TABLE_COLUMNS + NORMALIZED when normalising), wide (batch_size x label DataFrame of the
    plotted values: normalised or raw steps; NaN = not reached or not measured),
    figures (file name -> PNG bytes), notes (list of lines).
    """
    locations = [str(loc) for loc in (locations or [])]
    if not locations:
        raise SpecError("compare: give at least one study location (STORE/STUDY or a folder of "
                        "the paper's database)")
    prefix = parse_goal(goal)[1] if goal else None
    if split is not None and prefix is not None and split != prefix:
        raise SpecError(f"split: {split!r} contradicts the goal's prefix {prefix + '/'!r}; give one")
    split = split or prefix or "val"
    if split not in SPLITS:
        raise SpecError(f"split: {split!r} must be one of {', '.join(SPLITS)}")
    if normalize_at is not None and (isinstance(normalize_at, bool) or not isinstance(normalize_at, int)
                                     or normalize_at <= 0):
        raise SpecError(f"normalize_at: {normalize_at!r} must be a positive integer batch size")
    studies = [load_study(loc, goals=[goal] if goal else None, num_trials=num_trials)
               for loc in locations]
    measured = sorted({b for s in studies for b in s.batch_sizes})
    if normalize_at is not None and normalize_at not in measured:
        raise SpecError(f"normalize_at: batch size {normalize_at} was not measured by any study "
                        f"(measured: {', '.join(map(str, measured)) or 'none'})")

    names = disambiguate([s.name for s in studies], [s.location for s in studies])
    entries, tables, curves, notes, fits = [], [], {}, [], {}
    for study, name in zip(studies, names):
        study_goal = study.goals[0]  # the given goal, checked against this study's data
        label = f"{name} ({study_goal.label})"
        table = steps_to_result(study, study_goal, split)
        table.insert(0, "study", name)
        tables.append(table)
        curves[label] = table
        if goal_column(study_goal, split) not in study.measurements.columns:
            notes.append(f"{label}: no {goal_column(study_goal, split)} column in its measurements, "
                         "so it never reaches the goal")
        elif table[STEPS].isna().all():
            notes.append(f"{label}: no batch size reached the goal")
        entry = {"label": label, "study": name, "name": study.name, "location": study.location,
                 "title": study.title, "goal": study_goal.label, "batch_sizes": study.batch_sizes,
                 "fit": None}
        if fit:
            fits[label] = _fit(study, study_goal, split)
            entry["fit"] = fits[label].to_dict() if hasattr(fits[label], "to_dict") else None
            if not getattr(fits[label], "fitted", False):
                notes.append(f"{label}: no regime fit: {getattr(fits[label], 'reason', '')}")
        entries.append(entry)

    table = pd.concat(tables, ignore_index=True)[TABLE_COLUMNS]
    normalized = normalize_curves(curves, normalize_at, STEPS)
    if normalize_at is not None:
        table[NORMALIZED] = math.nan
        for label, frame in normalized.curves.items():
            study = next(e["study"] for e in entries if e["label"] == label)
            values = frame.set_index("batch_size")[NORMALIZED]
            rows = table["study"] == study
            table.loc[rows, NORMALIZED] = table.loc[rows, "batch_size"].map(values).to_numpy()
        notes = normalized.notes + notes
    for entry in entries:
        entry["normalized"] = normalize_at is not None and entry["label"] in normalized.curves
    value = NORMALIZED if normalize_at is not None else STEPS
    wide = pd.DataFrame(index=pd.Index(measured, name="batch_size"))
    for entry in entries:
        rows = table[table["study"] == entry["study"]].set_index("batch_size")[value]
        wide[entry["label"]] = rows.reindex(measured).astype(float)

    where = SPLIT_NAMES[split]
    goals = sorted({e["goal"] for e in entries})
    goal_text = f"{where} {goals[0]}" if len(goals) == 1 else f"each study's {where} goal"
    title = f"steps to result, {goal_text}"
    figures = {}
    if normalize_at is not None:
        figures[FIGURE_NORMALIZED] = steps_to_result_plot(
            curves, f"{title}, normalised at batch size {normalize_at}", fits=fits or None,
            normalize_at=normalize_at)
    figures[FIGURE_STEPS] = steps_to_result_plot(curves, title, fits=fits or None)
    figures[FIGURE_EXAMPLES] = steps_to_result_plot(
        curves, f"examples to result, {goal_text}", fits=fits or None, column=EXAMPLES)
    return {"goal": studies[0].goals[0].label if goal else None, "split": split,
            "normalize_at": normalize_at, "num_trials": num_trials, "studies": entries,
            "table": table, "wide": wide, "figures": figures, "notes": notes}


def _fit(study, goal, split):
    """The regime fit of one study's curve (imported here: regimes is optional for compare)."""
    from batchscale.analysis.regimes import fit_regimes
    from batchscale.analysis.steps import crossings

    return fit_regimes(crossings(study, goal, split))


def disambiguate(names: list[str], locations: list[str]) -> list[str]:
    """Study names, made unique: a repeated name gets the part of its location that differs
    from the others with that name (``name [a]``), or ``#k`` when even that is the same."""
    out = list(names)
    for name in dict.fromkeys(names):
        idx = [i for i, n in enumerate(names) if n == name]
        if len(idx) < 2:
            continue
        parts = [locations[i].rstrip("/").split("/") for i in idx]
        shortest = min(len(p) for p in parts)
        pre = 0
        while pre < shortest and len({p[pre] for p in parts}) == 1:
            pre += 1
        suf = 0
        while suf < shortest - pre and len({p[len(p) - 1 - suf] for p in parts}) == 1:
            suf += 1
        middles = ["/".join(p[pre:len(p) - suf]) for p in parts]
        for k, (i, middle) in enumerate(zip(idx, middles)):
            unique = middle and middles.count(middle) == 1
            out[i] = f"{name} [{middle}]" if unique else f"{name} #{k + 1}"
    return out


# ---- text, markdown, HTML, JSON -------------------------------------------------------
def _value_text(table: pd.DataFrame, entry: dict, batch_size: int, normalizing: bool) -> str:
    row = table[(table["study"] == entry["study"]) & (table["batch_size"] == batch_size)]
    if row.empty:
        return ""  # not measured
    if normalizing and not entry.get("normalized"):
        return "n/a"
    return H.fmt(float(row[NORMALIZED if normalizing else STEPS].iloc[0]))


def _display_wide(result: dict) -> pd.DataFrame:
    """batch size x study of the plotted values as text: "—" not reached, "" not measured,
    "n/a" a study left out of the normalisation."""
    normalizing = result["normalize_at"] is not None
    table = result["table"]
    sizes = sorted({int(b) for b in table["batch_size"]})
    rows = {"batch_size": [str(b) for b in sizes]}
    for k, entry in enumerate(result["studies"], 1):
        rows[f"[{k}]"] = [_value_text(table, entry, b, normalizing) for b in sizes]
    return pd.DataFrame(rows)


def _legend_line(result: dict) -> str:
    text = "— not reached; blank: batch size not measured"
    if result["normalize_at"] is not None:
        text += "; n/a: left out of the normalisation (see the notes)"
    return text


def _what(result: dict) -> str:
    what = f"{SPLIT_NAMES[result['split']]} steps to result"
    if result["normalize_at"] is not None:
        what += f", normalised to 1 at batch size {result['normalize_at']}"
    return what


def format_comparison(result: dict) -> str:
    """Plain text for the terminal: a legend of the studies, then batch size rows x study
    columns of steps to result (normalised when asked), then the notes."""
    lines = [f"{_what(result)}:"]
    lines += [f"  [{k}] {e['label']}  {e['location']}" for k, e in enumerate(result["studies"], 1)]
    frame = _display_wide(result)
    widths = [max(len(c), *(len(v) for v in frame[c])) for c in frame.columns]
    lines.append("  ".join(c.rjust(w) for c, w in zip(frame.columns, widths)))
    lines += ["  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in frame.itertuples(index=False)]
    lines.append(f"({_legend_line(result)})")
    lines += [f"note: {n}" for n in result["notes"]]
    return "\n".join(lines)


def _study_lines(result: dict) -> list[tuple[str, str, str]]:
    return [(f"[{k}]", e["label"], e["location"]) for k, e in enumerate(result["studies"], 1)]


def _fit_table(result: dict) -> pd.DataFrame | None:
    rows = []
    for e in result["studies"]:
        fit = e.get("fit")
        if not fit or not fit.get("fitted"):
            continue
        row = {"study": e["label"]}
        for key in ("s_min", "b_star", "perfect_scaling_end", "max_useful_batch_size"):
            est = fit.get(key) or {}
            low, high = est.get("low"), est.get("high")
            row[key] = (f"{H.fmt(est.get('value'))} [{H.fmt(low)}, {H.fmt(high)}]"
                        f"{'' if est.get('status') == 'measured' else ' (' + str(est.get('status')) + ')'}")
        rows.append(row)
    return pd.DataFrame(rows) if rows else None


def comparison_markdown(result: dict) -> str:
    lines = ["# Comparison of steps to result", "", f"{_what(result)}.", ""]
    lines += [f"- {key} {label}: `{location}`" for key, label, location in _study_lines(result)]
    lines += ["", *H.markdown_table(_display_wide(result)), "",
              f"{_legend_line(result)}.", ""]
    fits = _fit_table(result)
    if fits is not None:
        lines += ["## Regime fits (95% bootstrap intervals)", "", *H.markdown_table(fits), ""]
    if result["notes"]:
        lines += ["## Notes", "", *[f"- {n}" for n in result["notes"]], ""]
    lines += ["## All rows", "", *H.markdown_table(result["table"]), ""]
    lines += ["Figures: " + ", ".join(result["figures"]), ""]
    return "\n".join(lines)


CAPTIONS = {
    FIGURE_NORMALIZED: "Steps to result divided by each curve's steps at the reference batch size "
                       "(paper Figures 3–6); dashed: perfect scaling through the smallest batch "
                       "size that reached the goal.",
    FIGURE_STEPS: "Steps to result (paper Figures 15–17, Figure 1 style); dashed: perfect scaling "
                  "through the smallest batch size that reached the goal.",
    FIGURE_EXAMPLES: "Examples to result (steps × batch size); perfect scaling keeps it constant "
                     "(dashed).",
}


def comparison_html(result: dict) -> str:
    studies = "".join(f"<li>{H.esc(k)} {H.esc(label)}: <code>{H.esc(loc)}</code></li>"
                      for k, label, loc in _study_lines(result))
    body = (f"<h1>Comparison of steps to result</h1><p class=\"note\">{H.esc(_what(result))}. "
            "Steps to result: the earliest evaluation step at which a counted trial strictly beat "
            f"the goal.</p><ul>{studies}</ul>{H.warnings(result['notes'])}")
    body += "".join(H.figure(png, CAPTIONS.get(name, name), alt=name)
                    for name, png in result["figures"].items())
    body += "<h2>By batch size</h2>" + H.table(_display_wide(result))
    body += f'<p class="note">{H.esc(_legend_line(result))}.</p>'
    fits = _fit_table(result)
    if fits is not None:
        body += "<h2>Regime fits (95% bootstrap intervals)</h2>" + H.table(fits)
    body += "<h2>All rows</h2>" + H.table(result["table"])
    return H.page("batchscale: compare", body)


def comparison_json(result: dict) -> dict:
    records = json.loads(result["table"].to_json(orient="records"))
    return {key: result[key] for key in ("goal", "split", "normalize_at", "num_trials", "notes")} | {
        "studies": result["studies"], "rows": records, "figures": list(result["figures"])}


def write_comparison(result: dict, out_url: str) -> dict[str, str]:
    """Write compare.html, compare.md, compare.csv, compare.json and the figures into
    ``out_url`` (a local folder, created if needed, or gs://bucket/prefix); other files
    there are left alone. Returns file name -> URL."""
    fs = open_root(out_url)
    texts = {"compare.html": comparison_html(result), "compare.md": comparison_markdown(result),
             "compare.csv": result["table"].to_csv(index=False),
             "compare.json": json.dumps(comparison_json(result), indent=2)}
    urls = {}
    for name, text in texts.items():
        fs.write_text(name, text)
        urls[name] = fs.url(name)
    for name, png in result["figures"].items():
        if name not in OUTPUT_FILES:
            raise ValueError(f"compare: refusing to write unexpected file {name!r}")
        fs.write_bytes(name, png)
        urls[name] = fs.url(name)
    return urls
