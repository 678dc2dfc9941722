"""The errors check, first of four: a failing run measures the failure path, so its other
numbers mean little — error classes, their share, and where in time they happened."""

from __future__ import annotations

from typing import Any

from .findings import Evidence, Finding, Thresholds, pct


def check_errors(ev: Evidence, t: Thresholds) -> Finding:
    sweep = ev.sweep
    if "failed" not in sweep or "requests" not in sweep:
        return Finding("errors", "not measured", "the table has no failure counts")
    requests = int(sweep["requests"].sum())
    failed = int(sweep["failed"].sum())
    rate = failed / requests if requests else 0.0
    worst = sweep.assign(rate=sweep["failed"] / sweep["requests"]).sort_values("rate").iloc[-1]
    evidence: dict[str, Any] = {
        "requests": requests,
        "failed": failed,
        "error_rate": rate,
        "worst_run": worst.get("run"),
        "worst_error_rate": float(worst["rate"]),
    }
    detail = ""
    if ev.errors is not None and not ev.errors.empty:
        classes = ev.errors.groupby("error")["count"].sum().sort_values(ascending=False)
        evidence["classes"] = {str(k): int(v) for k, v in classes.items()}
        parts = []
        for err, count in classes.items():
            rows = ev.errors[ev.errors["error"] == err]
            first, last = rows["first_s"].min(), rows["last_s"].max()
            peak = rows.sort_values("peak_count").iloc[-1]
            parts.append(
                f"{err} {count} (from {first:.1f}s to {last:.1f}s, "
                f"peak {int(peak['peak_count'])} in the second at {peak['peak_t_s']:.0f}s"
                + (f" of {peak['run']}" if len(sweep) > 1 else "")
                + ")"
            )
        evidence["where"] = ev.errors.to_dict("records")
        detail = ": " + "; ".join(parts)
    if float(worst["rate"]) > t.max_error_rate:
        where = f" in {worst['run']}" if len(sweep) > 1 and "run" in worst else ""
        return Finding(
            "errors",
            "limit",
            f"{pct(float(worst['rate']))} of requests failed{where}, above "
            f"{pct(t.max_error_rate)}{detail}",
            evidence,
        )
    if failed:
        return Finding("errors", "ok", f"{failed} of {requests} requests failed{detail}", evidence)
    return Finding("errors", "ok", f"no failures in {requests} requests", evidence)
