"""The file contract: ``contract/files.json`` at the repository root, loaded once.

The package carries it as package data (``contract.json`` here is a link to the repository's
file, which the wheel build copies), so it is read the same way from a checkout and from an
installed wheel.

Every file loadgen writes is described there (:func:`names` lists their keys) — where it lies
in its directory, column names, Arrow types, nullability, units, meanings, metadata keys, JSON
field paths. The Rust tests (``loadgen/tests/contract.rs``) and
``analysis/tests/test_contract.py`` hold real files to it, so a name changed on one side fails
the other side's tests. Analysis code can take names from here (``columns("requests")``)
instead of typing them again.

Responsible for reading the contract and checking schemas and documents against it; it does
not read run directories (that is :mod:`.load`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from importlib.resources.abc import Traversable
from math import isfinite
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the schema checks take pyarrow's objects; the plain install has none
    import pyarrow as pa

#: The contract as package data (a link to ``contract/files.json`` in a checkout).
CONTRACT_PATH: Traversable = files(__package__) / "contract.json"


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    nullable: bool
    unit: str | None
    meaning: str

    @property
    def since_version(self) -> int:
        """The schema version that added the column: the contract's "Since (schema) version N"
        closing its meaning, else 1."""
        match = _SINCE.search(self.meaning)
        return int(match.group(1)) if match else 1


_SINCE = re.compile(r"\bSince (?:schema )?version (\d+)\.?\s*$")


@cache
def load(path: Traversable = CONTRACT_PATH) -> dict[str, Any]:
    """The whole contract document."""
    return json.loads(path.read_text())


def names() -> tuple[str, ...]:
    """The keys of every file the contract describes, in its order (``requests``, …)."""
    return tuple(load()["files"])


def file(name: str) -> dict[str, Any]:
    """One file's entry, by its key in :func:`names`."""
    files = load()["files"]
    if name not in files:
        raise KeyError(f"{name!r} is not in the contract; it has {', '.join(files)}")
    return files[name]


def columns(name: str) -> list[Column]:
    """The columns of a Parquet file of the contract, in order."""
    return [Column(**c) for c in file(name)["columns"]]


def column_names(name: str) -> list[str]:
    return [c.name for c in columns(name)]


def fields(name: str) -> dict[str, dict[str, Any]]:
    """The fields of a JSON file of the contract (``run_json``, …), by path
    (``summary.requests``)."""
    return {f["path"]: f for f in file(name)["fields"]}


def schema_version(name: str) -> str | int:
    return file(name)["schema_version"]


def type_name(data_type: pa.DataType) -> str:
    """The contract's spelling of an Arrow type (as in Rust's ``contract::type_name``).

    The contract's types are Arrow's (a dictionary column is one only in the Arrow schema a
    Parquet file carries), so this and :func:`schema_problems` take pyarrow's objects: the
    tests hold files to the contract with them (pyarrow is in the ``dev`` extra); the
    analysis checks names with :func:`column_problems`."""
    import pyarrow as pa

    simple = {
        pa.int32(): "int32",
        pa.int64(): "int64",
        pa.uint8(): "uint8",
        pa.uint16(): "uint16",
        pa.uint32(): "uint32",
        pa.uint64(): "uint64",
        pa.float64(): "float64",
        pa.string(): "utf8",
        pa.bool_(): "bool",
    }
    if data_type in simple:
        return simple[data_type]
    if pa.types.is_dictionary(data_type):
        return f"dictionary<{type_name(data_type.index_type)}, {type_name(data_type.value_type)}>"
    if pa.types.is_list(data_type):
        return f"list<{type_name(data_type.value_type)}>"
    if pa.types.is_struct(data_type):
        fields = ", ".join(f"{f.name}: {type_name(f.type)}" for f in data_type)
        return f"struct<{fields}>"
    return str(data_type)


def schema_problems(name: str, schema: pa.Schema, *, narrowed_ok: bool = False) -> list[str]:
    """Differences between an Arrow schema and the contract's columns (empty: none).

    ``narrowed_ok``: a column the contract lets be null may be declared not null (a file
    DuckDB wrote: its writer declares a column REQUIRED when it holds no null), never the
    other way round."""
    problems = []
    expected = column_names(name)
    if schema.names != expected:
        problems.append(f"{name}: columns {schema.names}, the contract says {expected}")
    for column in columns(name):
        if column.name not in schema.names:
            continue
        field = schema.field(column.name)
        if (got := type_name(field.type)) != column.type:
            problems.append(f"{name}.{column.name}: type {got}, contract {column.type}")
        if field.nullable != column.nullable and not (narrowed_ok and column.nullable):
            problems.append(
                f"{name}.{column.name}: nullable {field.nullable}, contract {column.nullable}"
            )
    return problems


def column_problems(name: str, names: Sequence[str]) -> list[str]:
    """The contract's columns of ``name`` missing from ``names`` (a file's columns, read by
    DuckDB), in one line each (empty: none)."""
    return [f"{name}: no column {c}" for c in column_names(name) if c not in names]


def metadata_problems(name: str, metadata: dict[str, str]) -> list[str]:
    """Differences between a Parquet file's key-value metadata and the contract's keys."""
    keys = file(name)["metadata"]
    listed = {k["key"] for k in keys}
    problems = [
        f"{name}: metadata {k['key']} missing"
        for k in keys
        if k["required"] and k["key"] not in metadata
    ]
    problems += [
        f"{name}: metadata {k} is not in the contract"
        for k in metadata
        if k.startswith("loadgen.") and k not in listed
    ]
    version = file(name)["schema_version"]
    if metadata.get("loadgen.schema_version") != version:
        problems.append(
            f"{name}: loadgen.schema_version {metadata.get('loadgen.schema_version')!r}, "
            f"contract {version!r}"
        )
    return problems


#: JSON types as loadgen writes them: an integer fits in 64 bits (i64 or u64), a number is
#: finite (``1e999`` and ``NaN`` parse in Python, but are never written).
_JSON_TYPES = {
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v < 2**64,
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool) and isfinite(v),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
}


def json_problems(name: str, document: Any) -> list[str]:
    """Differences between a JSON document and the contract's fields of ``name``.

    An object is closed (every key must be listed) when any of its keys is listed; an object
    listed without keys is an open map. ``a[]`` is an element of array ``a``: an object when
    the contract lists fields of it (``a[].x``).
    """
    problems: list[str] = []
    _walk(fields(name), "", document, problems)
    return problems


def _child(parent: str, key: str) -> str:
    return f"{parent}.{key}" if parent else key


def _walk(fields: dict[str, Any], path: str, value: Any, problems: list[str]) -> None:
    element = path.endswith("[]")
    if element and not isinstance(value, dict) and any(p.startswith(f"{path}.") for p in fields):
        problems.append(f"{path} holds {value!r}, the contract says object")
        return
    if path and not element:
        spec = fields[path]
        if value is None:
            if not spec["nullable"]:
                problems.append(f"{path} is null, the contract says it is not nullable")
            return
        if not _JSON_TYPES[spec["type"]](value):
            problems.append(f"{path} is {value!r}, the contract says {spec['type']}")
            return
    if isinstance(value, dict):
        prefix = _child(path, "")
        children = [
            p
            for p in fields
            if p.startswith(prefix) and p != prefix and not any(c in p[len(prefix) :] for c in ".[")
        ]
        if not children:
            return  # an open map
        unknown = [_child(path, k) for k in value if _child(path, k) not in fields]
        problems += [f"{p} is not in the contract" for p in unknown]
        for p in children:
            key = p[len(prefix) :]
            if key in value:
                _walk(fields, p, value[key], problems)
            elif not fields[p]["optional"]:
                problems.append(f"{p} is missing")
    elif isinstance(value, list):
        for item in value:
            _walk(fields, f"{path}[]", item, problems)


def is_segment(name: str) -> bool:
    """Whether a file in ``requests/`` named ``name`` is a closed segment: the contract's
    ``files.requests.segment_files`` rule, which loadgen writes by."""
    rule = load()["files"]["requests"]["segment_files"]
    return name.startswith(rule["prefix"]) and name.endswith(rule["suffix"])
