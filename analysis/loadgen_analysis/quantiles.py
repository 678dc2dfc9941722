"""Exact percentiles of a column of a huge relation in bounded memory, computed by DuckDB.

DuckDB's ``quantile_disc`` keeps every value of every group in memory and cannot spill, so on
a 100-million-row run it alone needs ~1 GB per percentile column. This module computes the
same numbers (the ⌈q·n⌉-th smallest value, at least the first: the rank of ``quantile_disc``
and of HDR histograms) from two hash aggregations, which DuckDB spills to disk under its
memory limit:

1. count the values per group in log buckets (256 per doubling, so a group has a few thousand
   buckets whatever its size) and find, for each percentile, the bucket holding its rank;
2. count the distinct values of only those buckets and pick the exact value at the rank.

Only the answer (one list of values per group) reaches Python. This module does not know the
record schema: callers pass a relation, its group keys and the value column.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import duckdb
import pandas as pd

#: Log buckets per doubling of the value in the first pass (width ~0.27 %).
BUCKETS_PER_DOUBLING = 256


def _bucket(value: str) -> str:
    """A monotone bucket number of ``value``: ``round(log2(v) · 256) + 1`` for v > 0, 0 for 0,
    ``-round(log2(1 − v) · 256)`` below (rounding keeps it monotone, which is all the two
    passes need, and costs less than ``floor``)."""
    scale = BUCKETS_PER_DOUBLING
    return (
        f"CASE WHEN {value} > 0 THEN CAST(log2({value}) * {scale} AS BIGINT) + 1 "
        f"ELSE -CAST(log2(1 - {value}) * {scale} AS BIGINT) END"
    )


def exact_quantiles(
    con: duckdb.DuckDBPyConnection,
    relation: str,
    keys: Sequence[str],
    value: str,
    quantiles: Sequence[float],
    column: str = "q",
    before_pass: Callable[[], None] | None = None,
) -> pd.DataFrame:
    """Per group of ``keys`` in ``relation`` (a table, view or parenthesised subquery): the
    exact ``quantiles`` of ``value`` (NULLs ignored), as a list column ``column`` in the order
    given — what ``quantile_disc(value, [quantiles])`` returns, without its memory.

    Groups with no non-NULL value are absent. ``keys`` are column names of ``relation``.
    ``before_pass`` is called before each of the two passes (to register a one-shot stream
    as ``relation`` afresh).
    """
    if not quantiles:
        raise ValueError("quantiles must not be empty")
    key_list = ", ".join(keys)

    def on(a: str) -> str:
        return " AND ".join(f"{a}.{k} IS NOT DISTINCT FROM t.{k}" for k in keys)

    sel = ", ".join(f"t.{k}" for k in keys)
    qs = ", ".join(repr(float(q)) for q in quantiles)
    source = f"""
        src AS (
            SELECT {key_list}, {value} AS v, {_bucket(value)} AS b
            FROM {relation} WHERE {value} IS NOT NULL
        )"""
    # Pass 1: the bucket holding each percentile's rank, and the rank within that bucket.
    if before_pass:
        before_pass()
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE quantile_targets AS
        WITH {source},
        hist AS (SELECT {key_list}, b, count(*) AS c FROM src GROUP BY ALL),
        cum AS (
            SELECT *, sum(c) OVER (PARTITION BY {key_list} ORDER BY b) AS upto,
                sum(c) OVER (PARTITION BY {key_list}) AS n
            FROM hist
        ),
        qs AS (SELECT unnest([{qs}]) AS q, unnest(range(1, {len(quantiles)} + 1)) AS qi),
        ranked AS (
            SELECT cum.*, qi, greatest(1, CAST(ceil(q * n) AS BIGINT)) AS rank
            FROM cum CROSS JOIN qs
        )
        SELECT {key_list}, qi, min(b) AS b, arg_min(rank - (upto - c), b) AS rank_in_bucket
        FROM ranked WHERE upto >= rank GROUP BY ALL
        """
    )
    # Pass 2: the distinct values of the chosen buckets only, and the one at each rank.
    if before_pass:
        before_pass()
    frame = con.execute(
        f"""
        WITH {source},
        wanted AS (SELECT DISTINCT {key_list}, b FROM quantile_targets),
        vals AS (
            SELECT {sel}, t.b, s.v, count(*) AS c
            FROM src s JOIN wanted t ON {on("s")} AND s.b = t.b GROUP BY ALL
        ),
        cum AS (
            SELECT *, sum(c) OVER (PARTITION BY {key_list}, b ORDER BY v) AS upto FROM vals
        ),
        picked AS (
            SELECT {sel}, t.qi, min(c.v) AS v
            FROM quantile_targets t JOIN cum c ON {on("c")} AND c.b = t.b
            WHERE c.upto >= t.rank_in_bucket
            GROUP BY ALL
        )
        SELECT {key_list}, list(v ORDER BY qi) AS {column} FROM picked GROUP BY ALL
        """
    ).df()
    con.execute("DROP TABLE quantile_targets")
    return frame
