"""Options shared by several commands, and the one way from SPEC + flags to a StudySpec.

``run``, ``validate``, ``compile``, ``upload`` and ``submit`` all take a study: a SPEC (a
YAML file or a shipped study's name; default quickstart) and flags that override its
fields. They register those flags with ``add_spec_args`` and read them back with
``build_spec``, so every command accepts the same overrides and refuses the same bad
values (``parse_spec`` is the one door; a bad value raises SpecError, which the root
prints as one line). ``compile``, ``upload`` and ``submit`` also share the placement
flags (``--preset``, ``--images``) and the check of ``--pipeline-store``. Every ``--goal``
passes ``check_goal_flags`` (a comparison the shell took as a redirection); ``report`` and
``run`` fit their results table to the terminal unless ``--wide`` (``table_width``).
"""

from __future__ import annotations

import argparse
import re

from batchscale.core import protocols
from batchscale.core.names import OPTIMIZERS
from batchscale.core.spec import SpecError, StudySpec
from batchscale.validation import load_spec_dict, parse_spec, with_batch_sizes

# A data set or model name as the registries spell them (checked there, by parse_spec).
_WORKLOAD_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def add_spec_args(parser: argparse.ArgumentParser) -> None:
    """SPEC and the "spec overrides" flags; ``build_spec`` reads them."""
    parser.add_argument("spec", nargs="?", help="study spec YAML, or a shipped study's name "
                        "(quickstart, toy_resnet8); or an experiment (YAML, or a shipped one: "
                        "figure4_local ...; docs/experiments.md); default: quickstart")
    group = parser.add_argument_group("spec overrides")
    group.add_argument("--workload", metavar="DATASET/MODEL",
                       help="start from that workload's defaults instead of the quickstart "
                            "(see `batchscale workloads`)")
    group.add_argument("--name", help="study name (a folder under the store root)")
    group.add_argument("--store", help="store root: a local folder or gs://bucket/prefix")
    group.add_argument("--dataset")
    group.add_argument("--model")
    group.add_argument("--optimizer")
    group.add_argument("--batch-sizes", help="comma-separated, e.g. 8,16,32")
    # Numbers are read by parse_spec, not argparse, so that a bad one is refused in one
    # line naming the field, like the same value in a YAML file.
    group.add_argument("--trials", type=_flag_number, help="trials per batch size")
    group.add_argument("--max-steps", type=_flag_number, help="one step budget for every batch size")
    group.add_argument("--goal", action="append", metavar="METRIC<VALUE",
                       help="goal (repeatable): METRIC<VALUE or METRIC>VALUE, e.g. "
                            "classification_error<0.05")
    group.add_argument("--seed", type=_flag_number)
    group.add_argument("--backend", help="jax or tensorflow")
    group.add_argument("--parallelism", type=_flag_number, help="pack tasks run at once")
    group.add_argument("--pack-size", type=_flag_number, metavar="K",
                       help="trials per pack task (default 0: from the workload and --preset)")
    group.add_argument("--protocol", help="when trials stop (the stopping protocol): "
                       + protocols.allowed_text(mark_default=True))
    group.add_argument("--max-rounds", type=_flag_number, metavar="R",
                       help="search rounds (top-ups and re-searches at the edges; default 3)")
    group.add_argument("--price", type=_flag_number, dest="price_per_device_hour",
                       metavar="USD", help="price per device-hour for cost to result (default 0: "
                       "the list price of the preset, see `batchscale presets`)")


def _flag_number(text: str):
    """A numeric flag's value: an int or float when it reads as one, else the text itself,
    which parse_spec then refuses naming the field (argparse would print its usage too)."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def build_spec(args: argparse.Namespace) -> StudySpec:
    """The validated spec from the file (or default) with command-line overrides."""
    if args.workload is not None:
        raw = _workload_start(args)
    else:
        raw = load_spec_dict(args.spec)
    return parse_spec(with_flags(raw, args))


def with_flags(raw: dict, args: argparse.Namespace) -> dict:
    """``raw`` (a study spec, not parsed yet) with the override flags given applied."""
    for key in ("name", "store", "seed", "backend", "parallelism", "pack_size", "protocol",
                "max_rounds", "price_per_device_hour"):
        if getattr(args, key) is not None:
            raw[key] = getattr(args, key)
    overrides = {key: getattr(args, key) for key in ("dataset", "model", "optimizer")
                 if getattr(args, key) is not None}
    written = raw["workload"].get("optimizer") if isinstance(raw.get("workload"), dict) else None
    if overrides and isinstance(raw.get("workload"), dict):  # else parse_spec refuses workload
        raw["workload"] = {**raw["workload"], **overrides}
    elif overrides and raw.get("workload") is None:
        raw["workload"] = overrides
    if args.max_steps is not None:  # before the batch sizes: it replaces any map the spec has
        raw["max_steps"] = args.max_steps
    if args.batch_sizes:
        try:
            sizes = [int(b) for b in args.batch_sizes.split(",") if b.strip()]
        except ValueError:
            raise SpecError(f"batch_sizes: {args.batch_sizes!r} must be comma-separated integers") from None
        raw = with_batch_sizes(raw, sizes)  # new batch sizes' budgets: validation's rule
    if args.trials is not None:
        raw["trials_per_batch_size"] = args.trials
    if args.goal:
        check_goal_flags(args.goal)  # a comparison the shell took as a redirection
        raw["goals"] = list(args.goal)  # the one goal syntax, checked by parse_spec
    if args.optimizer is not None:
        raw = _switched_space(raw, written, args.optimizer)
    return raw


def _switched_space(raw: dict, written, optimizer: str) -> dict:
    """``--optimizer`` over a study whose search space was written for another optimizer
    (the spec's ``written`` one, or the workload's own): the space for ``optimizer``
    (``workloads.optimizer_spaces``: momentum dropped for sgd; the Adam family's learning
    rate and metaparameters), said in one line on stderr. A spec that itself names an
    optimizer and parameters it does not read is still refused (by ``parse_spec``)."""
    import sys

    from batchscale.workloads.defaults import workload_defaults
    from batchscale.workloads.optimizer_spaces import optimizer_fixed, optimizer_space

    workload = raw.get("workload") if isinstance(raw.get("workload"), dict) else {}
    defaults = workload_defaults(str(workload.get("dataset")), str(workload.get("model")))
    own = written or (defaults.optimizer if defaults else None)
    space = raw.get("search_space")
    if own is None or own == optimizer or not {own, optimizer} <= set(OPTIMIZERS) or (
            space is None and (defaults is None or written is not None)):
        return raw
    if isinstance(space, dict):  # the spec's own space
        trials = raw.get("trials_per_batch_size", defaults.trials if defaults else 1)
        new = optimizer_space(space, own, optimizer, trials if isinstance(trials, int) else 1)
        fixed = raw.get("fixed")
        raw = {**raw, "search_space": new,
               **({"fixed": optimizer_fixed(fixed, optimizer)} if isinstance(fixed, dict) else {})}
    elif space is None:  # the workload's default space: with_defaults makes the same
        space = defaults.search_space
        new = optimizer_space(space, own, optimizer, defaults.trials)
    else:
        return raw
    if new != space:
        dropped = [name for name in space if name not in new]
        changed = [f"{name} [{cfg['min']:g}, {cfg['max']:g}] {cfg['scale']}" for name, cfg in new.items()
                   if space.get(name) != cfg and "min" in cfg]
        print(f"note: optimizer {optimizer}"
              + (f" has no {', '.join(dropped)}: dropped from the search space" if dropped else "")
              + (f"{';' if dropped else ':'} searching {' and '.join(changed)} instead, its other "
                 "metaparameters at their defaults" if changed else ""), file=sys.stderr)
    return raw


def check_here(spec: StudySpec) -> StudySpec:
    """``spec`` once a user's files and model pass the deep check
    (``training.workload_check``: Keras imported for theirs only), for the commands that
    train or check on this machine (``validate``, ``plan``, ``run --local``). A cluster's
    commands (``compile``, ``plan --compile``, ``upload``, ``submit``) leave it to the pod,
    whose image holds the user's code (pipelines/cluster_workload.py)."""
    import dataclasses

    from batchscale.store.layout import StudyStore
    from batchscale.training.workload_check import (
        check_data_source,
        check_model_source,
        check_user_workload,
    )
    from batchscale.validation.workload_spec import absolute_paths

    check_user_workload(spec)
    try:
        store = StudyStore(spec.store)
    except (OSError, ValueError):  # no store yet (or unreachable): nothing trained to compare
        store = None
    check_model_source(spec, store)
    # the store names a data set by its absolute path, as run --local hands it on
    check_data_source(dataclasses.replace(spec, workload=absolute_paths(spec.workload)), store)
    return spec


def _workload_start(args: argparse.Namespace) -> dict:
    """The raw spec ``--workload DATASET/MODEL`` starts from: that workload's defaults.
    With a SPEC it is refused, not silently ignored: a spec's workload is overridden
    field by field (--dataset, --model, --optimizer)."""
    if args.spec is not None:
        raise SpecError(f"--workload: cannot be combined with a SPEC ({args.spec}); use --dataset "
                        "and --model to override a spec's workload")
    dataset, slash, model = args.workload.partition("/")
    if not (slash and _WORKLOAD_PART.match(dataset) and _WORKLOAD_PART.match(model)):
        raise SpecError(f"--workload: {args.workload!r} must be DATASET/MODEL, e.g. "
                        "cifar_10/resnet_8 (see `batchscale workloads`)")
    return {"name": f"{dataset}-{model}", "store": "./batchscale-store",
            "workload": {"dataset": dataset, "model": model}}


def add_placement_args(parser: argparse.ArgumentParser) -> None:
    """--preset and --images: where the trainer runs and which built images the pipeline names."""
    from batchscale.core.presets import DEFAULT
    from batchscale.pipelines.placement import PRESETS

    parser.add_argument("--preset", default=DEFAULT, choices=list(PRESETS),
                        help="trainer placement preset (default: cpu); see `batchscale presets`")
    parser.add_argument("--images", metavar="FILE",
                        help="skaffold's --file-output JSON (e.g. build/images.json): the built "
                             "image references to put in the pipeline")
    parser.add_argument("--queue", default="", metavar="NAME",
                        help="Kueue LocalQueue the TrainJobs of a multi-host preset name "
                             "(default: none; docs/gke.md#past-one-node)")


def images_arg(args: argparse.Namespace) -> dict[str, str] | None:
    """The built image references from --images, or None (the pipeline keeps placeholders)."""
    from batchscale.core.images import read_images_file

    return read_images_file(args.images) if args.images else None


def pipeline_store_arg(args: argparse.Namespace) -> str:
    """--pipeline-store, checked (a cluster run writes to a bucket); "" when not given."""
    if args.pipeline_store and not args.pipeline_store.startswith("gs://"):
        raise SpecError("--pipeline-store: a cluster run needs a gs://bucket/prefix store")
    return args.pipeline_store or ""


# A goal flag that is only a metric name (with its split): what reaches us when the shell
# took ``>0.9`` (or ``<0.9``) of an unquoted ``--goal metric>0.9`` as a redirection.
_BARE_METRIC = re.compile(r"^\s*(?:[A-Za-z_]+/)?[A-Za-z_]\w*\s*$")
_NUMBER = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")
RECENT_SECONDS = 30.0  # a file the redirection created: made this recently (the CLI starts in seconds)


def check_goal_flags(goals, flag: str = "--goal", folder: str = ".") -> None:
    """Refuse a ``--goal`` that has no comparison with a hint to quote it.

    Unquoted, ``--goal classification_error>0.9`` is split by the shell: ``>0.9`` sends
    our output to a new, empty file named ``0.9`` and we see ``--goal
    classification_error``; ``<0.9`` reads our input from a file ``0.9`` (the shell
    refuses the command itself when there is none). When an empty file named like a
    number was made in ``folder`` in the last ``RECENT_SECONDS``, the hint names it (the
    user may want it gone) and the goal most likely typed; otherwise it writes the goal
    in the metric's own direction with VALUE for the number we never saw.
    Goals with a comparison, and words that name no metric, pass untouched (``parse_goal``
    checks them)."""
    from batchscale.core.names import METRIC_DIRECTIONS

    for goal in [goals] if isinstance(goals, str) else goals or []:
        if not isinstance(goal, str) or not _BARE_METRIC.match(goal):
            continue
        goal = goal.strip()
        if goal.rsplit("/", 1)[-1] not in METRIC_DIRECTIONS:
            continue  # no metric either: the goal syntax's own message says what is allowed
        op = "<" if METRIC_DIRECTIONS.get(goal.rsplit("/", 1)[-1], "minimize") == "minimize" else ">"
        stray = _redirection_file(folder)
        if stray is not None:
            name, age = stray
            typed = f"{goal}{op}{name}"
            how = (f"likely took '>{name}' as a redirection (an empty file {name!r} was made "
                   f"in this folder {age:.0f}s ago; delete it)")
        else:
            typed, how = f"{goal}{op}VALUE", "may have taken '<VALUE' or '>VALUE' as a redirection"
        raise SpecError(f"{flag}: {goal!r} has no comparison; the shell {how}: quote the goal, "
                        f"{flag} '{typed}'")


def _redirection_file(folder: str) -> tuple[str, float] | None:
    """The newest empty file in ``folder`` named like a number and made in the last
    ``RECENT_SECONDS`` (what ``>0.9`` leaves), with its age in seconds; or None."""
    import os
    import time

    found, now = [], time.time()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return None
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if (_NUMBER.match(entry.name) and entry.is_file(follow_symlinks=False) and info.st_size == 0
                and now - info.st_mtime <= RECENT_SECONDS):
            found.append((info.st_mtime, entry.name))
    if not found:
        return None
    made, name = max(found)
    return name, max(now - made, 0.0)


WIDE_HINT = "; --wide shows every column"  # after the columns a table left out to fit


def add_wide_arg(parser: argparse.ArgumentParser) -> None:
    """--wide: the steps-to-result table with every column, however wide the terminal."""
    parser.add_argument("--wide", action="store_true",
                        help="print the results table with every column (default: the columns "
                             "that fit the terminal, 80 when it is not one; the rest are named "
                             "below the table and are in steps_to_result.csv)")


def table_width(args: argparse.Namespace) -> int | None:
    """The width the results table must fit: None with --wide, else the terminal's
    (``COLUMNS`` when set; 80 when stdout is no terminal)."""
    import shutil

    return None if getattr(args, "wide", False) else shutil.get_terminal_size((80, 24)).columns


# Pack tasks (lanes) a round runs at once on a cluster unless --parallelism or the spec
# says otherwise: 16 lanes keep a paper-size study (3 rounds) at 48 loop iterations and
# about 210 pods (``pipelines.pipeline_size``), while a spec's local default of 2 would
# leave a cluster's node pool all but idle.
CLUSTER_PARALLELISM = 16
LOCAL_PARALLELISM = StudySpec.__dataclass_fields__["parallelism"].default


def for_cluster(spec, args: argparse.Namespace):
    """``spec`` (a study or an experiment) as a cluster runs it: its ``parallelism`` is
    ``--parallelism`` when given, else the spec's when it is not the local default (2),
    else ``CLUSTER_PARALLELISM``."""
    import dataclasses

    if getattr(args, "parallelism", None) is not None or spec.parallelism != LOCAL_PARALLELISM:
        return spec
    return dataclasses.replace(spec, parallelism=CLUSTER_PARALLELISM)
