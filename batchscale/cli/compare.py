"""Analysis commands of the ``batchscale`` CLI that read finished studies.

  batchscale compare STUDY [STUDY ...] [--goal G] [--split val|train] [--normalize-at B]
                     [--trials N] [--fit] [--out DIR]

STUDY is one of our studies (STORE/STUDY) or a folder of the paper's released database
holding one workload; local paths and gs:// URLs both work. Registered on the main parser
with ``add_analysis_commands(sub)``; errors are SpecError / ValueError / FileNotFoundError,
which ``batchscale.cli.main.main`` prints as one ``batchscale: error: ...`` line (exit 2).
"""

from __future__ import annotations

import argparse

DEFAULT_COMPARE_OUT = "./batchscale-compare"


def add_analysis_commands(sub) -> None:
    """Register ``compare`` on the main parser's subparsers."""
    cmp = sub.add_parser(
        "compare", help="overlay steps to result of several studies (the paper's Figures 3-6)",
        description="Steps to result per batch size for several studies side by side: a table "
                    "(batch sizes x studies), overlay figures and compare.html/.md/.csv/.json.")
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
                          "only compare.* and compare_*.png are written there")
    cmp.set_defaults(func=cmd_compare)


def cmd_compare(args: argparse.Namespace) -> int:
    from batchscale.analysis.compare import compare_studies, format_comparison, write_comparison

    result = compare_studies(args.studies, goal=args.goal, split=args.split,
                             normalize_at=args.normalize_at, num_trials=args.trials, fit=args.fit)
    urls = write_comparison(result, args.out)
    print(format_comparison(result))
    print(f"compare: {urls['compare.html']}")
    return 0
