"""``batchscale report`` and ``batchscale compare``: read finished studies.

  batchscale report STUDY [--goal G ...] [--trials N] [--statuses S] [--price USD]
                    [--robustness-k K] [--out DIR]
      analyse one study and write its report (HTML, Markdown, CSV, JSON)
  batchscale compare STUDY [STUDY ...] [--goal G] [--split val|train] [--normalize-at B]
                     [--trials N] [--fit] [--out DIR]
      overlay several studies' steps to result (the paper's Figures 3-6)

STUDY is one of our studies (STORE/STUDY) or a folder of the paper's released database
(one workload for compare); local paths and gs:// URLs both work. Thin: the work is in
batchscale.analysis. Refused inputs are InputErrors (SpecError among them), which the
CLI's root prints as one ``batchscale: error: ...`` line (exit 2); a ``--goal`` stricter
than the goals an early-stopping study stopped its trials at, where no trial ran to its
budget, is one of them (``batchscale.analysis.reading.censoring``). Files of the study that
could not be read or believed (``batchscale.analysis.reading.study_files``) are left out of the
report, named one per line on stderr, and make ``report`` exit 3 (``EXIT_DAMAGED``), the
report written all the same. ``report --goal`` without ``--out`` writes beside the study's
own report, in ``report/goal-<goals>/`` (``analysis.report.report_location``).
``print_stored_report`` is also what ``run --local`` prints when the pipeline is done, with
the same lines and exit status.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import sys

from batchscale.cli.options import WIDE_HINT, add_wide_arg, check_goal_flags, table_width
from batchscale.core.errors import StoreDamaged
from batchscale.core.names import STATUSES
from batchscale.core.spec import SpecError

DEFAULT_COMPARE_OUT = "./batchscale-compare"
EXIT_DAMAGED = 3  # the report was written, but some of the study's files could not be read
REPORT_EPILOG = (
    "With --goal and no --out the report goes beside the study's own, into "
    "report/goal-<goals>/ ('<' written -below-, '>' -above-). "
    "exit status: 0 the report was written from every file; 2 bad arguments or no study "
    "at STUDY; 3 a file or folder stands where the report writes (named on stderr, nothing "
    "written), or some files of the study are missing, unreadable or not what was written "
    "(e.g. a truncated measurements.csv): they are left out, named one per line on stderr "
    "and under 'Damaged or unreadable files' in the report (summary.json: damaged), and the "
    "report is written without them.")


def add_commands(sub) -> None:
    """Register ``report`` and ``compare`` on the CLI's subparsers."""
    add_report_command(sub)
    add_compare_command(sub)


def add_report_command(sub) -> None:
    """Register ``report`` on the CLI's subparsers."""
    rep = sub.add_parser(
        "report", help="analyse a study and write its report (HTML, Markdown, CSV, JSON)",
        description="Steps to result for every goal (validation and training), the regime fit "
                    "with bootstrap intervals, budgets, metaparameter figures and search-space "
                    "warnings, written to the study's report folder (or --out).",
        epilog=REPORT_EPILOG)
    rep.add_argument("study", help="STORE/STUDY (e.g. ./batchscale-store/quickstart, "
                                   "gs://b/p/study) or a folder in the paper's released layout")
    rep.add_argument("--goal", action="append", metavar="METRIC<VALUE",
                     help="goal(s) to analyse, e.g. classification_error<0.3 or "
                          "average_precision>0.31 (default: the study's, or the paper's Figure 1 "
                          "goal); a goal stricter than those an early-stopping study stopped "
                          "its trials at is marked exact / upper bound / stopped early, or "
                          "refused when no trial ran to its budget")
    rep.add_argument("--trials", type=int, metavar="N",
                     help="only the first N trials (lowest ids) of each batch size")
    rep.add_argument("--statuses", default="COMPLETE", metavar="S[,S]",
                     help=f"trial statuses that count toward goals, from {','.join(STATUSES)} "
                          "(default: COMPLETE, as in the paper)")
    rep.add_argument("--step-budget", type=int, action="append", metavar="STEPS",
                     help="step budget(s) for the best-metric-under-budget figure (default: 3 powers of 2)")
    rep.add_argument("--example-budget", type=int, action="append", metavar="EXAMPLES",
                     help="example budget(s) for the same figure (default: 3 powers of 2)")
    rep.add_argument("--resamples", type=int, default=1000,
                     help="bootstrap resamples for the regime intervals (default: 1000)")
    rep.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    rep.add_argument("--price", metavar="USD",
                     help="price per device-hour in USD for cost to result, > 0 (default: the "
                          "spec's price_per_device_hour, else the list price of the preset the "
                          "trials ran on)")
    rep.add_argument("--robustness-k", type=int, default=3, metavar="K",
                     help="the robustness section shows the best, 2nd best, ... K-th best "
                          "trial's steps to result per batch size, 1 or more (default: 3)")
    rep.add_argument("--out", help="report folder, local or gs:// (default: the study's report/, "
                                   "or report/goal-<goals>/ with --goal)")
    add_wide_arg(rep)
    rep.set_defaults(func=cmd_report)


def parse_price(text: str | None) -> float:
    """``--price``: a finite number > 0 (None: not given, 0)."""
    if text is None:
        return 0.0
    try:
        price = float(text)
    except ValueError:
        price = math.nan
    if not (math.isfinite(price) and price > 0):
        raise SpecError(f"--price: {text!r} is not allowed; allowed: a price in USD per "
                        "device-hour greater than 0, e.g. --price 2.5")
    return price


def parse_statuses(text: str) -> tuple[str, ...]:
    statuses = tuple(s.strip().upper() for s in text.split(",") if s.strip())
    bad = [s for s in statuses if s not in STATUSES]
    if bad or not statuses:
        raise SpecError(f"--statuses: {text!r} must be a comma list of {', '.join(STATUSES)}")
    return statuses


def cmd_report(args: argparse.Namespace) -> int:
    from batchscale.analysis.reading.study_reader import UnreadableStudy
    from batchscale.analysis.report import report_study, summary_json
    from batchscale.cli.experiment_report import is_experiment_location

    if args.resamples < 0:
        raise SpecError(f"--resamples: {args.resamples} must be 0 or more")
    robustness_k = getattr(args, "robustness_k", 3)
    if robustness_k < 1:
        raise SpecError(f"--robustness-k: {robustness_k} must be 1 or more")
    price = parse_price(getattr(args, "price", None))
    check_goal_flags(args.goal)
    if is_experiment_location(args.study):
        from batchscale.cli.experiment_report import report_experiment_folder

        return report_experiment_folder(args.study, table_width(args), args)
    try:
        result, written = report_study(
            args.study, out=args.out, goals=args.goal, num_trials=args.trials,
            statuses=parse_statuses(args.statuses), step_budgets=args.step_budget,
            example_budgets=args.example_budget, resamples=args.resamples, seed=args.seed,
            price=price, robustness_k=robustness_k)
    except UnreadableStudy as err:
        return _unreadable(err)
    doc = summary_json(result)
    print_summary(result.steps, doc, written["html"], width=table_width(args))
    return print_damaged(doc.get("damaged"))


def _unreadable(err) -> int:
    """No batch size of a study could be read: its damaged files, then the error; exit 3."""
    print_damaged([d.to_dict() for d in err.damaged])
    print(f"batchscale: error: {err}", file=sys.stderr)
    return EXIT_DAMAGED


def print_damaged(damaged: list[dict] | None) -> int:
    """One ``batchscale: warning:`` line per damaged file on stderr; the exit status: 3
    when there is any (the numbers were computed without them), else 0."""
    for damage in damaged or []:
        print(f"batchscale: warning: {damage['message']}", file=sys.stderr)
    return EXIT_DAMAGED if damaged else 0


def print_summary(steps, doc: dict, report_url: str, elapsed: float | None = None,
                  width: int | None = None) -> None:
    """The validation tables, each goal's regimes, every definition's critical batch size
    (``critical_batch_size_page``), warnings, what early stopping leaves
    unknown, batch sizes short of non-divergent trials, then the answer (last, where a
    terminal leaves it in view: ``analysis.statistics.answer``) and where the report is.
    ``width``: the characters the tables must fit (None: every column)."""
    from batchscale.analysis.pages.answer_box import console_lines
    from batchscale.analysis.pages.critical_batch_size_page import cbs_section
    from batchscale.analysis.pages.report_pages import format_table
    from batchscale.analysis.pages.sections import render_console
    from batchscale.analysis.statistics.critical_batch_sizes import from_summary

    print(format_table(steps[steps["split"] == "val"], width, WIDE_HINT))
    for goal, fit in (doc.get("regimes") or {}).items():
        if not fit.get("fitted"):
            print(f"{goal}: no regime fit ({fit.get('reason')})")
            continue
        print(f"{goal}: " + "; ".join(_estimate_line(name, fit, key) for key, name in (
            ("s_min", "S_min"), ("b_star", "B*"), ("perfect_scaling_end", "perfect scaling ends"),
            ("max_useful_batch_size", "max useful batch size"))))
    for line in render_console(cbs_section(from_summary(doc)), width):
        print(line)
    answer = console_lines(doc.get("answer"))
    line = None if answer else time_cost_line(doc.get("time_and_cost"))
    if line:
        print(line)
    for warning in doc.get("search_space_warnings") or []:
        print(f"warning: {warning['message']}")
    for note in doc.get("notes") or []:
        print(f"note: {note}")
    for note in doc.get("censoring") or []:  # what early stopping leaves unknown (the
        if "an upper bound at" in note or "unknown (stopped early)" in note:  # report has all)
            print(f"early stopping: {note}")
    for note in doc.get("search_round_notes") or []:
        if " non-divergent: " in note:  # a batch size short of the trials it wants
            print(f"search: {note}")
    unfinished, expected = doc.get("unfinished") or [], doc.get("expected_trials")
    if unfinished and expected:
        resumable = sum(u.get("resume_step") is not None for u in unfinished)
        print(f"unfinished: {len(unfinished)} of {expected} trials ({resumable} resumable from a "
              "checkpoint), listed under 'Unfinished trials' in the report; run the same study "
              "again to finish them")
    damaged = doc.get("damaged") or []
    if damaged:
        print(f"damaged: {len(damaged)} file(s) could not be read or do not match what was "
              "written; what depends on them is left out (listed on stderr and under "
              "'Damaged or unreadable files' in the report)")
    for line in answer:
        print(line)
    if elapsed is not None:
        print(f"wall time {elapsed:.0f}s")
    print(f"report: {report_url}")


def time_cost_line(time_and_cost: dict | None) -> str | None:
    """``time and cost: fastest batch size B (T s [lo, hi]); cheapest B' (USD C [lo, hi])``
    from summary.json's time_and_cost: what a summary.json written before the answer
    prints (None: one written before time and cost)."""
    summary = (time_and_cost or {}).get("summary") if isinstance(time_and_cost, dict) else None
    if not isinstance(summary, dict):
        return None

    from batchscale.analysis.statistics.amounts import duration, money
    from batchscale.analysis.statistics.intervals import format_interval

    def m(v):
        return money(v if v is not None else math.nan, "").strip()

    def interval(choice, fmt):
        return format_interval(choice["value"], choice.get("low"), choice.get("high"), fmt)

    def close(choice):
        near = choice.get("close") or []
        return f"; within 10%: {', '.join(map(str, near))}" if near else ""

    fastest, cheapest = summary.get("fastest"), summary.get("cheapest")
    parts = [f"fastest batch size {fastest['batch_size']} ({fastest['devices']} device(s), "
             f"{interval(fastest, duration)}{close(fastest)})"
             if fastest else "fastest batch size: none (no steps to result with a step time)"]
    currency = summary.get("currency", "USD")
    parts.append(f"cheapest {cheapest['batch_size']} ({currency} {interval(cheapest, m)}"
                 f"{close(cheapest)})" if cheapest else "cheapest: none (no price or no time)")
    return "time and cost to result: " + "; ".join(parts)


def _estimate_line(name: str, fit: dict, key: str) -> str:
    """``B* 457 [248, 865]``, ``max useful batch size ≥ 2476 (beyond the largest batch
    size measured, 4000)``: the short form of ``intervals.regime_text`` (the notes that
    follow say the rest)."""
    from batchscale.analysis.statistics.intervals import regime_text

    est = fit.get(key)
    if not est or est.get("value") is None:
        return f"{name} —"
    return f"{name} " + regime_text(est, fit.get("batch_sizes") or [], steps=key == "s_min",
                                    level=fit.get("level", 0.95), short=True)


def print_stored_report(spec, store, elapsed: float | None = None, width: int | None = None) -> int:
    """After a local run: print what the pipeline's aggregate step wrote to the store
    (``width``: as ``print_summary``'s)."""
    import pandas as pd

    base = f"{spec.name}/report"
    if not store.fs.exists(f"{base}/summary.json"):
        raise StoreDamaged(f"no report in {store.url(base)}; run `batchscale report "
                                f"{store.url(spec.name)}` to build it")
    steps = pd.read_csv(io.StringIO(store.fs.read_text(f"{base}/steps_to_result.csv")))
    doc = json.loads(store.fs.read_text(f"{base}/summary.json"))
    print_summary(steps, doc, store.url(f"{base}/report.html"), elapsed, width)
    return print_damaged([_on_this_machine(d, store) for d in doc.get("damaged") or []])


def _on_this_machine(damage: dict, store) -> dict:
    """A damaged file as the console names it: the report names a local file relative to
    the store root (``analysis.reading.locations``), the console where it is, as ``report`` does."""
    name = str(damage.get("file", ""))
    if not name or "://" in name or name.startswith("/"):
        return damage
    return {**damage, "file": store.url(name),
            "message": str(damage.get("message", "")).replace(name, store.url(name), 1)}


def add_compare_command(sub) -> None:
    """Register ``compare`` on the CLI's subparsers."""
    cmp = sub.add_parser(
        "compare", help="overlay steps to result of several studies (the paper's Figures 3-6)",
        description="Steps to result per batch size for several studies side by side: a table "
                    "(batch sizes x studies), overlay figures and compare.html/.md/.csv/.json.",
        epilog=f"exit status {EXIT_DAMAGED}: some files of the studies could not be read; they "
               "are left out and named on stderr and in the notes")
    cmp.add_argument("studies", nargs="+", metavar="STUDY",
                     help="STORE/STUDY, or a folder of the paper's database with one workload "
                          "(local or gs://)")
    cmp.add_argument("--goal", metavar="G",
                     help="goal for every study, e.g. 'classification_error<0.3' or "
                          "'average_precision>0.31' (default: each study's first goal)")
    cmp.add_argument("--split", default=None, choices=["val", "train"],
                     help="measure the goal on the validation (default) or training metric")
    cmp.add_argument("--normalize-at", type=int, metavar="B",
                     help="divide each curve by its steps to result at batch size B (as in the "
                          "paper's Figures 3-6)")
    cmp.add_argument("--trials", type=int, metavar="N",
                     help="use only the first N trials (lowest ids) at each batch size")
    cmp.add_argument("--fit", action="store_true",
                     help="also fit S(B) = S_min (1 + B*/B) per study and draw it with its band")
    cmp.add_argument("--out", default=DEFAULT_COMPARE_OUT, metavar="DIR",
                     help=f"folder or gs:// prefix for the compare files (default: {DEFAULT_COMPARE_OUT}); "
                          "only compare.* and compare_*.svg are written there")
    cmp.set_defaults(func=cmd_compare)


def cmd_compare(args: argparse.Namespace) -> int:
    from batchscale.analysis.compare import compare_studies, format_comparison, write_comparison
    from batchscale.analysis.reading.study_reader import UnreadableStudy

    check_goal_flags(args.goal)
    try:
        result = compare_studies(args.studies, goal=args.goal, split=args.split,
                                 normalize_at=args.normalize_at, num_trials=args.trials,
                                 fit=args.fit)
    except UnreadableStudy as err:
        return _unreadable(err)
    urls = write_comparison(result, args.out)
    print(format_comparison(result))
    print(f"compare: {urls['compare.html']}")
    return print_damaged([d.to_dict() for d in result.damaged])
