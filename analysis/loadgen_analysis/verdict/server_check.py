"""The server check of a sweep — what needs several runs, the one part of a verdict the
analysis decides: over a sweep of workers, throughput on a plateau while latency grows ∝ N
(requests queue behind a fixed capacity; the capacity model that fits better — the USL or the
operational-law bounds — gives X_max and the knee, when the sweep identifies it); over an
open-rate sweep, the levels the engine found did not keep up (the knee is the highest rate
kept). Runs of different models are not one sweep and get no model. One run's verdict is the
engine's (run.json ``verdict``), never judged here."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..models.bounds import BoundsFit, better_fit, fit_bounds
from ..models.identify import not_identifiable
from ..models.rate_sweep import RateSweep
from ..models.usl import USLFit, fit_usl
from .attribution_types import CapacityModel
from .findings import Evidence, Finding, Thresholds, mean_share, pct, top_level


def _plateau(sweep: pd.DataFrame, t: Thresholds) -> dict[str, Any] | None:
    columns = ["throughput_rps"] + (["mean_latency_ms"] if "mean_latency_ms" in sweep else [])
    levels = sweep.groupby("connections", as_index=False)[columns].mean().sort_values("connections")
    if len(levels) < 3:
        return None
    peak = float(levels["throughput_rps"].max())
    peak_n = int(levels.loc[levels["throughput_rps"].idxmax(), "connections"])
    on = levels[levels["throughput_rps"] >= t.plateau_share * peak]
    # The plateau is the run of levels from the first that reaches it to the top.
    first_n = float(on["connections"].min())
    on = levels[levels["connections"] >= first_n]
    span = float(on["connections"].max()) / first_n
    info: dict[str, Any] = {
        "peak_rps": peak,
        "peak_at_n": peak_n,
        "plateau_from_n": int(first_n),
        "plateau_to_n": int(on["connections"].max()),
        "plateau_levels": len(on),
        "plateau_rps": float(on["throughput_rps"].mean()),
        "plateau_span": span,
        "holds": len(on) >= 2 and span >= t.plateau_span,
    }
    if "mean_latency_ms" in sweep and len(on) >= 2:
        slope = float(
            np.polyfit(np.log(on["connections"]), np.log(on["mean_latency_ms"].astype(float)), 1)[0]
        )
        info["latency_slope"] = slope
        first_r = float(on["mean_latency_ms"].iloc[0])
        last_r = float(on["mean_latency_ms"].iloc[-1])
        info["latency_growth"] = last_r / first_r
    return info


@dataclass(frozen=True)
class Models:
    usl: USLFit | None = None
    bounds: BoundsFit | None = None
    #: Why a fit is not identifiable by the sweep (model name → reason): it is not used.
    unidentified: tuple[tuple[str, str], ...] = ()

    @property
    def chosen(self) -> CapacityModel | None:
        """The better of the identifiable fits; None when neither is."""
        rejected = dict(self.unidentified)
        usl = self.usl if self.usl is not None and "usl" not in rejected else None
        bounds = self.bounds if self.bounds is not None and "bounds" not in rejected else None
        return better_fit(usl, bounds)

    @property
    def notes(self) -> tuple[str, ...]:
        return tuple(
            f"{name} not identifiable, not drawn: {why}" for name, why in self.unidentified
        )


def _fit_models(sweep: pd.DataFrame) -> Models:
    fits: dict[str, Any] = {}
    unidentified = []
    for name, fit in (("usl", fit_usl), ("bounds", fit_bounds)):
        try:
            fits[name] = fit(sweep["connections"], sweep["throughput_rps"])
        except ValueError:
            fits[name] = None
            continue
        why = not_identifiable(fits[name], sweep["connections"], sweep["throughput_rps"])
        if why is not None:
            unidentified.append((name, why))
    return Models(**fits, unidentified=tuple(unidentified))


def model_text(models: Models) -> str:
    """Which capacity model fits better, with both fits' quality."""
    chosen = models.chosen
    if chosen is None:
        return "no capacity model is identifiable from these levels" if models.unidentified else ""
    other = models.bounds if chosen is models.usl else models.usl
    if isinstance(chosen, BoundsFit):
        text = (
            f"bounds model fits best: X_max {chosen.x_max:.0f} req/s, knee N* = R(1)·X_max = "
            f"{chosen.n_max:.1f} (R² {chosen.r_squared:.3f})"
        )
    elif math.isfinite(chosen.n_max):
        text = (
            f"USL fits best: X_max {chosen.x_max:.0f} req/s at N_max {chosen.n_max:.0f} "
            f"(R² {chosen.r_squared:.3f})"
        )
    else:
        text = f"USL fits best: no peak (κ = 0; R² {chosen.r_squared:.3f})"
    if other is not None:
        text += f"; {other.name} R² {other.r_squared:.3f}"
    return text


def _plateau_text(plateau: dict[str, Any]) -> str:
    text = (
        f"throughput stopped at {plateau['plateau_rps']:.0f} req/s from N = "
        f"{plateau['plateau_from_n']} to {plateau['plateau_to_n']}"
    )
    slope = plateau.get("latency_slope")
    if slope is not None:
        text += f" while mean latency grew {plateau['latency_growth']:.1f}× (∝ N^{slope:.2f})"
    return text


def _server_wait(ev: Evidence, evidence: dict[str, Any]) -> None:
    """Time to first byte, and the server's share of it: first byte minus sending (send_ns)."""
    if ev.components is None or ev.components.empty:
        return
    comp = ev.components
    _, evidence["ttfb_share"] = mean_share(comp, "mean_ttfb_ms")
    if comp["send_ms"].notna().any():
        _, evidence["server_wait_share"] = mean_share(comp, "first_byte_ms")


def _check_sweep(
    ev: Evidence, t: Thresholds, evidence: dict[str, Any]
) -> tuple[Finding, float | None, Models]:
    sweep = ev.sweep
    models = _fit_models(sweep)
    for name in ("usl", "bounds"):
        if getattr(models, name) is not None:
            evidence[name] = getattr(models, name).as_dict()
    if models.chosen is not None:
        evidence["capacity_model"] = models.chosen.name
    if models.unidentified:
        evidence["not_identifiable"] = dict(models.unidentified)
    plateau = _plateau(sweep, t)
    if plateau is not None:
        evidence["plateau"] = plateau
        slope = plateau.get("latency_slope")
        if plateau["holds"] and (slope is None or slope >= t.min_latency_slope):
            reasons = [_plateau_text(plateau), model_text(models)]
            if "ttfb_share" in evidence:
                reasons.append(f"time to first byte is {pct(evidence['ttfb_share'])} of latency")
            text = "; ".join(r for r in reasons if r)
            return Finding("server", "limit", text, evidence), plateau["plateau_rps"], models
    top = int(top_level(sweep)["connections"].iloc[0])
    text = f"throughput still grows with N (no plateau up to N = {top})"
    return Finding("server", "ok", text, evidence), None, models


def check_server(ev: Evidence, t: Thresholds) -> tuple[Finding, float | None, Models]:
    evidence: dict[str, Any] = {}
    _server_wait(ev, evidence)
    if ev.rate_sweep is not None:
        return _check_rate_sweep(ev.rate_sweep, evidence), ev.rate_sweep.knee_rps, Models()
    if ev.mixed_models:
        kinds = ", ".join(sorted({str(m) for m in ev.models}))
        text = (
            f"runs of different models ({kinds}) are not one sweep: their workers are not one "
            "axis of N, so no capacity model is fitted; explain each model's runs apart"
        )
        return Finding("server", "not measured", text, evidence), None, Models()
    levels = ev.sweep["connections"].nunique() if "connections" in ev.sweep else 0
    if levels >= 3 and ev.over_n:
        return _check_sweep(ev, t, evidence)
    text = (
        "fewer than three levels of N of one closed model: no plateau to find (a run's own "
        "verdict is the engine's)"
    )
    return Finding("server", "not measured", text, evidence), None, Models()


def _check_rate_sweep(sweep: RateSweep, evidence: dict[str, Any]) -> Finding:
    """Open-rate sweep: a level the system did not keep up with is where it stops (the knee,
    the highest rate kept, is capacity's definition); every level kept up is no limit."""
    evidence["rate_sweep"] = sweep.as_dict()
    if sweep.first_failed is None:
        evidence["kept_up"] = True
        return Finding("server", "ok", sweep.summary(), evidence)
    text = sweep.summary()
    wait = evidence.get("server_wait_share", evidence.get("ttfb_share"))
    if wait is not None:
        text += f"; waiting for the first byte is {pct(wait)} of latency"
    return Finding("server", "limit", text, evidence)
