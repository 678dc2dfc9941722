"""Exports of a run for tools that do not read Parquet (``loadgen-analyze export``): its rows
as CSV or JSON lines (:mod:`.rows`), and an HdrHistogram interval log of its latencies per op
(:mod:`.hlog`). Each streams the run batch by batch, so memory stays bounded whatever the row
count; none of them computes a result the summary shows.
"""
