"""A run's rows as CSV or JSON lines, with the contract's ``requests`` columns in its order
(``contract/files.json``): one line per request, for tools that do not read Parquet (as
``k6 --out csv`` and ``vegeta encode``).

Streamed: each segment is read batch by batch with pyarrow and each batch written before the
next is read, so memory is a batch's whatever the row count. Dictionary columns (``op``,
``phase``, ``error``, ``check``) become text; a column an older segment lacks is empty; a
sharded run's times are rebased on its earliest shard's anchor, as the analysis does. Nothing
is computed: the values are the recorded ones.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from ..io import contract
from ..io.run import Run

#: Rows per batch read and written.
BATCH_ROWS = 65_536

_TYPES = {
    "int64": pa.int64(),
    "uint8": pa.uint8(),
    "uint16": pa.uint16(),
    "uint32": pa.uint32(),
    "uint64": pa.uint64(),
}


def schema() -> pa.Schema:
    """The exported columns: the contract's, dictionaries as text."""
    return pa.schema(
        pa.field(c.name, _TYPES.get(c.type, pa.string()), nullable=c.nullable)
        for c in contract.columns("requests")
    )


def batches(run: Run) -> Iterator[pa.RecordBatch]:
    """Every row of ``run`` in :func:`schema`, segment by segment, :data:`BATCH_ROWS` at a
    time."""
    out = schema()
    for part in run.parts:
        offset_ns = 0
        if run.shards and part.anchor_unix_ns is not None and run.anchor_unix_ns is not None:
            offset_ns = part.anchor_unix_ns - run.anchor_unix_ns
        for segment in part.segments:
            file = pq.ParquetFile(segment)
            present = [n for n in out.names if n in file.schema_arrow.names]
            for batch in file.iter_batches(batch_size=BATCH_ROWS, columns=present):
                yield _conformed(batch, out, offset_ns)


def _conformed(batch: pa.RecordBatch, out: pa.Schema, offset_ns: int) -> pa.RecordBatch:
    arrays = []
    for field in out:
        if field.name in batch.schema.names:
            column = batch.column(field.name).cast(field.type)
        else:
            column = pa.nulls(batch.num_rows, field.type)
        if offset_ns and field.name in ("start_ns", "intended_ns"):
            column = pc.add(column, pa.scalar(offset_ns, pa.int64()))
        arrays.append(column)
    return pa.RecordBatch.from_arrays(arrays, schema=out)


def write_csv(run: Run, sink: BinaryIO) -> int:
    """Writes ``run``'s rows as CSV with a header line (an empty cell is a null); returns the
    number of rows."""
    rows = 0
    with pacsv.CSVWriter(sink, schema()) as writer:
        for batch in batches(run):
            writer.write_batch(batch)
            rows += batch.num_rows
    return rows


def write_jsonl(run: Run, sink: BinaryIO) -> int:
    """Writes ``run``'s rows as JSON lines, one object per row with every column (``null``
    for a null); returns the number of rows."""
    rows = 0
    for batch in batches(run):
        lines = _json_lines(batch)
        offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)
        start, end = offsets[lines.offset], offsets[lines.offset + len(lines)]
        sink.write(memoryview(lines.buffers()[2])[start:end])
        rows += batch.num_rows
    return rows


def _json_lines(batch: pa.RecordBatch) -> pa.StringArray:
    """The batch's rows as JSON text ending in a newline, built column by column in Arrow."""
    parts: list[pa.Array | pa.Scalar] = []
    for i, field in enumerate(batch.schema):
        key = ("{" if i == 0 else ",") + json.dumps(field.name) + ":"
        parts += [pa.scalar(key), _json_values(batch.column(i))]
    parts.append(pa.scalar("}\n"))
    return pc.binary_join_element_wise(*parts, "")


def _json_values(column: pa.Array) -> pa.Array:
    """A column as JSON values: numbers as they are, text quoted and escaped (by
    :func:`json.dumps`, once per distinct value), nulls as ``null``."""
    if pa.types.is_string(column.type):
        encoded = pc.dictionary_encode(column)
        quoted = pa.array(
            [json.dumps(v, ensure_ascii=False) for v in encoded.dictionary.to_pylist()], pa.string()
        )
        text = pc.take(quoted, encoded.indices)
    else:
        text = column.cast(pa.string())
    return pc.fill_null(text, "null")
