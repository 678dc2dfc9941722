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


def _rank_buckets(key_list: str, quantiles: Sequence[float]) -> str:
    """The SQL after a ``hist(keys…, b, c)`` CTE that picks, per group and percentile ``qi``,
    the bucket ``b`` holding the percentile's rank and the rank within that bucket."""
    qs = ", ".join(repr(float(q)) for q in quantiles)
    return f"""cum AS (
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
        FROM ranked WHERE upto >= rank GROUP BY ALL"""


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
        {_rank_buckets(key_list, quantiles)}
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


def exact_quantile_sets(
    con: duckdb.DuckDBPyConnection,
    relation: str,
    fine_keys: Sequence[str],
    value: str,
    sets: Sequence[tuple[Sequence[str], Sequence[float]]],
) -> list[pd.DataFrame]:
    """:func:`exact_quantiles` for several groupings of one relation, reading it twice in all
    instead of twice per grouping: per ``(keys, quantiles)`` of ``sets`` (``keys`` a subset of
    ``fine_keys``) a frame as :func:`exact_quantiles` returns it.

    Pass 1 counts the values per group of ``fine_keys`` and bucket once; each grouping's
    buckets of interest come from those counts. Pass 2 counts the distinct values of every
    bucket of interest to any grouping, per fine group, once; each grouping picks its values
    from those counts."""
    for _, quantiles in sets:
        if not quantiles:
            raise ValueError("quantiles must not be empty")
    fine = ", ".join(fine_keys)
    source = f"""
        src AS (
            SELECT {fine}, {value} AS v, {_bucket(value)} AS b
            FROM {relation} WHERE {value} IS NOT NULL
        )"""
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE qset_hist AS WITH {source} "
        f"SELECT {fine}, b, count(*) AS c FROM src GROUP BY ALL"
    )
    for i, (keys, quantiles) in enumerate(sets):
        key_list = ", ".join(keys)
        con.execute(
            f"""
            CREATE OR REPLACE TEMP TABLE qset_targets_{i} AS
            WITH hist AS (SELECT {key_list}, b, sum(c) AS c FROM qset_hist GROUP BY ALL),
            {_rank_buckets(key_list, quantiles)}
            """
        )
    wanted = " UNION ".join(
        f"SELECT {', '.join(f'h.{k}' for k in fine_keys)}, h.b FROM qset_hist h "
        f"SEMI JOIN qset_targets_{i} t ON {_same_bucket(keys, 'h', 't')}"
        for i, (keys, _) in enumerate(sets)
    )
    con.execute(f"CREATE OR REPLACE TEMP TABLE qset_wanted AS {wanted}")
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE qset_values AS
        WITH {source}
        SELECT {", ".join(f"s.{k}" for k in fine_keys)}, s.b, s.v, count(*) AS c
        FROM src s JOIN qset_wanted w ON {_same_bucket(fine_keys, "s", "w")} GROUP BY ALL
        """
    )
    frames = [_picked(con, i, keys) for i, (keys, _) in enumerate(sets)]
    tables = ["qset_hist", "qset_wanted", "qset_values"] + [
        f"qset_targets_{i}" for i in range(len(sets))
    ]
    for table in tables:
        con.execute(f"DROP TABLE {table}")
    return frames


def _same_bucket(keys: Sequence[str], a: str, t: str) -> str:
    """SQL: rows ``a`` and ``t`` are in the same group of ``keys`` and the same bucket."""
    return " AND ".join(f"{a}.{k} IS NOT DISTINCT FROM {t}.{k}" for k in [*keys, "b"])


def _picked(con: duckdb.DuckDBPyConnection, i: int, keys: Sequence[str]) -> pd.DataFrame:
    """Pass 2's answer for grouping ``i`` of :func:`exact_quantile_sets`: per group of
    ``keys``, the values at its target ranks, from the distinct values' counts."""
    key_list = ", ".join(keys)
    sel = ", ".join(f"t.{k}" for k in keys)
    return con.execute(
        f"""
        WITH vals AS (
            SELECT {", ".join(f"v.{k}" for k in keys)}, v.b, v.v, sum(v.c) AS c
            FROM qset_values v SEMI JOIN qset_targets_{i} t ON {_same_bucket(keys, "v", "t")}
            GROUP BY ALL
        ),
        cum AS (
            SELECT *, sum(c) OVER (PARTITION BY {key_list}, b ORDER BY v) AS upto
            FROM vals
        ),
        picked AS (
            SELECT {sel}, t.qi, min(c.v) AS v
            FROM qset_targets_{i} t JOIN cum c ON {_same_bucket(keys, "c", "t")}
            WHERE c.upto >= t.rank_in_bucket
            GROUP BY ALL
        )
        SELECT {key_list}, list(v ORDER BY qi) AS q FROM picked GROUP BY ALL
        """
    ).df()
