"""The sweep sections of a run report: levels of workers modelled over N (Little's Law, the
capacity models the sweep identifies, the scalability plots), levels of an open-rate sweep
over the offered rate (achieved against offered, latency against rate, the knee in the
verdict's words), and runs of different models shown apart, each on its own axis.

Lays out what :mod:`loadgen_analysis.models` and the verdict computed; computes nothing of its
own.
"""

from __future__ import annotations

import html

import pandas as pd

from ..io.run import Run
from ..models.bounds import BoundsFit
from ..models.identify import MAX_KNEE_BEYOND_N, MAX_XMAX_BEYOND_X
from ..models.littles_law import calibration_from_sweep, littles_law_table, sweep_table
from ..models.rate_sweep import RateSweep, achieved_shortfall, rate_sweep_table
from ..models.usl import USLFit
from ..units import count
from ..verdict.attribution import Attribution
from . import plots
from .markup import figure_html, table_html


def sweep_section(runs: list[Run], result: Attribution) -> list[str]:
    """Levels of one model: over N (Little's Law, the capacity models from three levels, the
    scalability plots) or, for open-model runs, over the offered rate; runs of different models
    each on their own axis, without a model; nothing for a single level."""
    groups: dict[str | None, list[Run]] = {}
    for run in runs:
        groups.setdefault(run.model, []).append(run)
    if len(groups) == 1:
        if result.rate_sweep is not None:
            return _rate_sweep_html(result.rate_sweep.levels, result.rate_sweep)
        return _over_n_html(runs, result.capacity_model, result)
    parts = [
        "<h2>Runs of different models</h2>",
        "<p class='note'>These runs are of different models ("
        + html.escape(", ".join(str(m) for m in groups))
        + "): an open run's workers are what its schedule needed in flight, not a concurrency "
        "level, so no two models share an axis of N and no capacity model is fitted. Each "
        "model's runs are shown apart; report or explain them alone for their model.</p>",
    ]
    for model, group in groups.items():
        if model == "open" and len(group) >= 2:
            parts += _rate_sweep_html(rate_sweep_table(group), None)
        elif model != "open":
            parts += _over_n_html(group, None, None)
    return parts


_RATE_COLUMNS = {
    "run": "run",
    "offered_rps": "offered (req/s)",
    "achieved_rps": "achieved (completions/s, second half)",
    "achieved_share": "completed / sent (second half)",
    "dropped": "dropped",
    "late_share": "late share",
    "p50_ms": "p50 ms",
    "p99_ms": "p99 ms",
    "kept": "kept up",
    "why_not": "why not",
}


def _rate_sweep_html(levels: pd.DataFrame, sweep: RateSweep | None) -> list[str]:
    """An open-rate sweep: achieved against offered rate and latency against rate per level,
    each marked kept up or not; with ``sweep`` (the verdict's), its knee in the verdict's words."""
    summary = sweep.summary() if sweep is not None else None
    knee_rps = sweep.knee_rps if sweep is not None else None
    if levels.empty:
        return []
    knee = (
        f"<p><b>Knee</b> (the highest offered rate kept up with, as <code>loadgen capacity"
        f"</code> defines it): {html.escape(summary)}.</p>"
        if summary is not None
        else ""
    )
    return [
        "<h2>Open-rate sweep: achieved against offered</h2>",
        "<p>An open run's workers are what its schedule needed in flight, not a concurrency "
        "level: these levels are modelled over the offered rate, not over N (no Little's Law "
        f"over N, no USL or bounds). A level kept up when no send was dropped and the "
        f"responses completed in its schedule's second half were at least "
        f"{1 - achieved_shortfall():.0%} of the sends intended in it "
        "(<code>contract/sustainability.json</code>, capacity's tolerance). Late sends are "
        "the client's, judged by the verdict.</p>",
        knee,
        table_html(levels, _RATE_COLUMNS),
        figure_html(
            plots.plot_rate_sweep(levels, knee_rps),
            "Achieved against offered rate (hollow: did not keep up) and latency against rate.",
        ),
    ]


def _over_n_html(
    runs: list[Run], fit: USLFit | BoundsFit | None, result: Attribution | None
) -> list[str]:
    """Levels of workers: Little's Law, the capacity models (three levels or more, when
    ``result`` carries them) and the scalability plots."""
    levels = {r.connections for r in runs if r.connections is not None}
    if len(levels) < 2 or any(r.connections is None for r in runs):
        return []
    sweep = sweep_table(runs)
    calibration = calibration_from_sweep(sweep)
    parts = [
        "<h2>Little's Law</h2>",
        f"<p>Calibration R(1) = {calibration.r1_s * 1e3:.3f} ms from run "
        f"<b>{html.escape(calibration.source)}</b> ({count(calibration.workers, 'worker')})"
        + (
            ""
            if calibration.workers == 1
            else " — no one-worker run given, so the smallest level stands in"
        )
        + "; predicted X(N) = N / R(1). N_eff = X · R̄ is how many workers were busy on "
        "average.</p>",
        table_html(littles_law_table(sweep, calibration), _LITTLE_COLUMNS),
    ]
    if len(levels) >= 3 and result is not None:
        parts += ["<h2>Capacity model: USL and operational-law bounds</h2>", _models_html(result)]
    figures = (
        (
            plots.plot_throughput_vs_n(sweep, calibration, fit),
            "Observed throughput against Little's-Law prediction and the capacity model "
            f"that fits better ({fit.name if fit else 'none identifiable'}); the star marks "
            "the knee.",
        ),
        (
            plots.plot_latency_vs_n(sweep, fit),
            "Mean and p99 latency against concurrency: on a plateau, latency grows ∝ N.",
        ),
        (
            plots.plot_n_eff(sweep),
            "Effective concurrency against configured: points under the dotted line mean "
            "the client did not keep its workers busy.",
        ),
    )
    return [*parts, "<h2>Scalability plots</h2>", *(figure_html(f, c) for f, c in figures)]


_LITTLE_COLUMNS = {
    "connections": "N",
    "run": "run",
    "throughput_rps": "observed X (req/s)",
    "predicted_rps": "predicted N/R(1)",
    "efficiency": "observed/predicted",
    "mean_latency_ms": "mean R (ms)",
    "latency_growth": "R(N)/R(1)",
    "n_eff": "N_eff = X·R̄",
    "n_eff_ratio": "N_eff/N",
}


def _models_html(result: Attribution) -> str:
    """Both capacity models with their fit quality, and which one the verdict and plots use."""
    rows = []
    for fit in (result.usl, result.bounds):
        if fit is None:
            continue
        params = (
            f"σ={fit.sigma:.3g}, κ={fit.kappa:.3g}, λ={fit.lam:.4g}/s"
            if isinstance(fit, USLFit)
            else f"R(1)={fit.r1_ms:.3g} ms, λ=1/R(1)={fit.lam:.4g}/s"
        )
        worst = max((abs(r) for r in fit.residuals), default=float("nan"))
        why = dict(result.finding("server").evidence.get("not_identifiable") or {}).get(fit.name)
        rows.append(
            {
                "model": "USL" if isinstance(fit, USLFit) else "bounds min(N/R(1), X_max)",
                "used": "✔" if fit is result.capacity_model else "",
                "identifiable": f"no: {why}" if why else "yes",
                "parameters": params,
                "knee N": fit.n_max,
                "X_max (req/s)": fit.x_max,
                "R²": fit.r_squared,
                "RMSE (req/s)": fit.rmse,
                "largest residual (req/s)": worst,
                "points": fit.points,
            }
        )
    if not rows:
        return "<p class='note'>No capacity model could be fitted to these levels.</p>"
    return (
        "<p>The USL describes contention and coherency; the operational-law bounds X(N) ≤ "
        "min(N / R(1), X_max), knee N* = R(1)·X_max, describe a fixed capacity. The verdict "
        "and the plots use the one that fits better (higher R²) among those the sweep "
        "identifies: a fit whose knee lies beyond "
        f"{MAX_KNEE_BEYOND_N:g}× the largest N measured, or whose X_max lies beyond "
        f"{MAX_XMAX_BEYOND_X:g}× the largest throughput measured, is not identifiable and "
        "is neither used nor drawn.</p>" + table_html(pd.DataFrame(rows))
    )
