"""Synthetic series with known change points, and how well the history's detector finds them.

The cases of issue 37's acceptance: a step of 2, 5, 10 or 20 % under 1, 2 or 5 % Gaussian
noise (relative), a change of variance alone (no step: not a change the gate should call), and
outliers (single runs 3× the level: not changes either). Each case is drawn ``repeats`` times
with its own seed (so the numbers are reproducible) and passed through
:func:`loadgen_analysis.history.changes.change_points` exactly as a store's series is.

Scoring: a change point found within ``tolerance`` runs of a true one is a true positive (each
true one matched once); any other found point is a false positive; a true one not matched is a
false negative. Precision = TP / (TP + FP), recall = TP / (TP + FN).
``python -m loadgen_analysis.testing.change_series`` prints the table docs/ci.md reports.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..history.changes import change_points

#: Runs before and after the step (a nightly series of a month).
BEFORE, AFTER = 20, 10


@dataclass(frozen=True)
class Case:
    name: str
    step: float  # relative change of the level at the true change point
    noise: float  # relative standard deviation
    kind: str = "step"  # "step", "variance" or "outliers"


def cases() -> list[Case]:
    steps = [
        Case(f"step {s:.0%} under {n:.0%} noise", s, n)
        for s in (0.02, 0.05, 0.10, 0.20)
        for n in (0.01, 0.02, 0.05)
    ]
    return [
        *steps,
        Case("variance 1% → 5%, no step", 0.0, 0.01, "variance"),
        Case("2 outliers (3×) under 2% noise, no step", 0.0, 0.02, "outliers"),
        Case("no change, 2% noise", 0.0, 0.02, "none"),
    ]


def draw(case: Case, seed: int) -> tuple[np.ndarray, list[int]]:
    """A series of BEFORE + AFTER values around 100 and its true change points."""
    rng = np.random.default_rng(seed)
    level = np.r_[np.full(BEFORE, 100.0), np.full(AFTER, 100.0 * (1 + case.step))]
    noise = np.full(BEFORE + AFTER, case.noise)
    if case.kind == "variance":
        noise[BEFORE:] = 0.05
    values = level * (1 + noise * rng.standard_normal(BEFORE + AFTER))
    if case.kind == "outliers":
        for i in rng.choice(np.arange(3, BEFORE + AFTER - 3), size=2, replace=False):
            values[i] *= 3.0
    truth = [BEFORE] if case.kind == "step" else []
    return values, truth


def _frame(values: np.ndarray) -> pd.DataFrame:
    n = len(values)
    return pd.DataFrame(
        {
            "fingerprint": "synthetic",
            "op": "op",
            "run_id": [f"r{i:03d}" for i in range(n)],
            "started_unix_ns": np.arange(n, dtype=np.int64),
            "commit": None,
            "p50_ms": values,
        }
    )


def score(case: Case, repeats: int = 20, tolerance: int = 1) -> dict[str, float]:
    """True and false positives and negatives of ``case`` over ``repeats`` draws."""
    tp = fp = fn = 0
    for seed in range(repeats):
        values, truth = draw(case, seed)
        found = [p.index for p in change_points(_frame(values), "p50_ms")]
        unmatched = list(truth)
        for index in found:
            match = next((t for t in unmatched if abs(t - index) <= tolerance), None)
            if match is None:
                fp += 1
            else:
                tp += 1
                unmatched.remove(match)
        fn += len(unmatched)
    return {
        "case": case.name,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "precision": tp / (tp + fp) if tp + fp else float("nan"),
        "recall": tp / (tp + fn) if tp + fn else float("nan"),
    }


def table(repeats: int = 20) -> pd.DataFrame:
    return pd.DataFrame([score(case, repeats) for case in cases()])


if __name__ == "__main__":
    frame = table()
    print(frame.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    total = frame[["tp", "fp", "fn"]].sum()
    print(
        f"all cases: precision {total.tp / (total.tp + total.fp):.2f}, "
        f"recall {total.tp / (total.tp + total.fn):.2f}"
    )
