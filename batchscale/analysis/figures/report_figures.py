"""The report's figures, as SVG bytes with captions, for one analysed study.

``report.analyse`` computes the tables; ``report_figures`` draws what they show (the
paper's Figures 1, 2, 8, 9, 11, 12, 13, 21, 22 and the best trials' curves), so the
analysis and its drawing stay apart and each module stays readable.
"""

from __future__ import annotations

import pandas as pd

from batchscale.analysis.figures import plots, plots_metaparameters, plots_time
from batchscale.analysis.reading.censoring import protocol_label
from batchscale.analysis.reading.study_reader import Study
from batchscale.core.names import EFFECTIVE_LEARNING_RATE, momentum_parameter
from batchscale.core.protocols import StoppingProtocol

CENSORED_CAPTION = ("; hollow: censored by early stopping (a trial there stopped before the "
                    "budget, so the true best may be better).")


def report_figures(study: Study, steps, val, fits, budgets, optimal, trials,
                   protocols: tuple[StoppingProtocol, ...] = ()) -> dict[str, tuple[bytes, str]]:
    """file name -> (SVG, caption). ``protocols``: the study's (``censoring.study_protocol``),
    whose early stopping censored the hollow budget points (``best_under_budget``'s
    ``censored``); the legend names them."""
    primary = study.goals[0]
    out = {"steps_to_result.svg": (
        plots.steps_to_result_plot(val, study.title, fits=fits),
        "Steps to result against batch size (log2-log2), one line per goal; dashed: perfect "
        "scaling through the smallest batch size; solid band: fit S = S_min(1 + B*/B) with its "
        "bootstrap interval (Figures 1, 2).")}
    train = steps[(steps["goal"] == primary.label) & (steps["split"] == "train")]
    if train["steps_to_result"].notna().any():
        out["train_vs_val.svg"] = (
            plots.train_vs_val_plot(val[primary.label], train, f"{study.name}: {primary.label}"),
            "The same goal measured on the training and the validation metric (Figure 12).")
    for kind in ("steps", "examples"):
        table = budgets[budgets["kind"] == kind]
        hollow = bool(table["censored"].astype(bool).any()) if "censored" in table else False
        if table["best_value"].notna().any():
            out[f"budget_{kind}.svg"] = (
                plots.budget_plot(table, study.name,
                                  f"validation {primary.metric.replace('_', ' ')}",
                                  train_examples=study.train_examples,
                                  protocol=protocol_label(protocols) or None),
                f"Best validation {primary.metric} reached within each {kind[:-1]} budget, "
                "over all counted trials (Figure 11)" + (CENSORED_CAPTION if hollow else "."))
    momentum, effective = parameter_words(study.optimizer)
    out["optimal_metaparameters.svg"] = (
        plots_metaparameters.optimal_metaparameters_plot(optimal, f"{study.name}: {primary.label}",
                                                         study.optimizer),
        f"The best trial's learning rate, {momentum} and effective learning rate {effective} at "
        "each batch size, with linear and square-root scaling heuristics from the smallest batch "
        "size (Figures 8, 21, 22).")
    contours = "dashed lines of constant effective learning rate; " if "γ" in effective else ""
    out["lr_momentum.svg"] = (
        plots_metaparameters.lr_momentum_scatter(trials, val[primary.label], study.search_space,
                                                 f"{study.name}: {primary.label}",
                                                 optimizer=study.optimizer),
        f"Every trial's learning rate and 1 − {momentum} per batch size (panel title: how many "
        "of its complete trials reached the goal): goal reached, not reached, stopped early "
        f"(by the protocol, before it could), infeasible; {contours}star: the best trial "
        "(Figures 9, 13).")
    curves = _best_curves(study, val[primary.label])
    if curves:
        out["best_trial_curves.svg"] = (
            plots.best_trial_curves_plot(curves, primary.metric, primary.value,
                                         f"best trial per batch size ({primary.label})"),
            "Validation metric of each batch size's best trial against step.")
    return out


def parameter_words(optimizer: str | None) -> tuple[str, str]:
    """How the report names ``optimizer``'s momentum parameter and effective learning rate:
    ("momentum", "η/(1−γ)") for the paper's; ("β₁", "η") for the Adam family."""
    column, symbol = momentum_parameter(optimizer) or ("momentum", "γ")
    return ("momentum" if column == "momentum" else symbol,
            EFFECTIVE_LEARNING_RATE.get(optimizer, "η/(1−γ)"))


TIME_FIGURES = ("time_to_result.svg", "cost_to_result.svg")


def time_figures(time_cost, title: str) -> dict[str, tuple[bytes, str]]:
    """The "Time and cost to result" figures (``time_to_result.TimeCost``), file name ->
    (SVG, caption); shown in their own section of the report, not under Figures."""
    table, limit = time_cost.table, time_cost.device_limit
    where = f" on {time_cost.profile.device_kind}" if time_cost.profile.device_kind else ""
    bars = ("bars: the bootstrap interval of steps to result times the step time (the step "
            "time's own spread is not in it)")
    return {
        "time_to_result.svg": (
            plots_time.time_to_result_plot(table, time_cost.fastest, limit, f"{title}: time to result"),
            f"Time to result = steps to result x seconds per step{where}, against batch size "
            f"(log2 x, log y); {bars}; star: the fastest; dotted: the device limit "
            f"({limit.basis})."),
        "cost_to_result.svg": (
            plots_time.cost_to_result_plot(table, time_cost.cheapest, limit,
                                           f"{title}: cost to result", time_cost.currency),
            f"Cost to result = time x devices x {time_cost.currency} "
            f"{time_cost.price_per_device_hour:.4g} per device-hour ({time_cost.price_source}); "
            f"{bars}; star: the cheapest."),
    }


def _best_curves(study: Study, summary: pd.DataFrame) -> dict[int, pd.DataFrame]:
    rows = study.measurements
    curves = {}
    for r in summary.dropna(subset=["steps_to_result"]).itertuples():
        trial = rows[(rows["batch_size"] == r.batch_size) & (rows["trial_id"] == r.best_trial)]
        curves[int(r.batch_size)] = trial.sort_values("step")
    return curves
