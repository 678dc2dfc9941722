"""Regression tests for issue 36, finding 8: ``loadgen-analyze summary`` on a run.json holding
``[]`` printed ``unexpected AttributeError``. run.json is read in one place (``io.load``) and
held to the contract there: a document that is not an object, or a field of the wrong type at
any level (a string where a number goes, a list where an op goes), is one line naming the file
and the field, exit 2, for every command. Copies of a run recorded against loadgen-server
(``error_run``: its run.json has today's fields, error counts included).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loadgen_analysis.cli import main
from loadgen_analysis.errors import RunLoadError
from loadgen_analysis.io import contract
from loadgen_analysis.io.load import load_run

from .conftest import Recorded

DATA = Path(__file__).resolve().parents[2] / "data" / "runs"
BASELINE = DATA / "regression" / "baseline-5ms" / "r1"


#: A value of another type than each of the contract's.
_NOT = {
    "integer": "fast",
    "number": "fast",
    "string": 7,
    "boolean": "yes",
    "object": [],
    "array": {},
}


def _hostile(path: tuple, value: Any) -> Any:
    """A value of another type than the contract gives the place (else than ``value``'s)."""
    spec = contract.fields("run_json").get(_contract_path(path))
    return _NOT[spec["type"]] if spec else _other_type(value)


def _other_type(value: Any) -> Any:
    """A value of another JSON type than ``value``'s."""
    if isinstance(value, dict):
        return []
    if isinstance(value, list):
        return {}
    if isinstance(value, bool | int | float):
        return "fast"
    return 7


def _paths(value: Any, path: tuple = ()) -> Iterator[tuple]:
    """Every place in a JSON document (an array by its first element), the root first."""
    yield path
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, (*path, key))
    elif isinstance(value, list) and value:
        yield from _paths(value[0], (*path, 0))


def _with(document: Any, path: tuple, value: Any) -> Any:
    """A copy of ``document`` with the value at ``path`` replaced."""
    if not path:
        return value
    document = json.loads(json.dumps(document))
    parent = document
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return document


def _contract_path(path: tuple) -> str:
    """``("summary", "ops", 0, "op")`` → ``summary.ops[].op``, as the contract names it."""
    text = ""
    for key in path:
        text += "[]" if isinstance(key, int) else f".{key}" if text else key
    return text


def _typed(path: tuple) -> bool:
    """Whether the contract gives the place a type (not the inside of an open map)."""
    name, fields = _contract_path(path), contract.fields("run_json")
    return not name or name in fields or any(f.startswith(f"{name}.") for f in fields)


@pytest.fixture
def run_dir(tmp_path: Path, error_run: Recorded) -> Path:
    shutil.copytree(error_run.path, tmp_path / "run")
    return tmp_path / "run"


def test_a_value_of_the_wrong_type_anywhere_is_named_by_the_loader(run_dir: Path) -> None:
    document = json.loads((run_dir / "run.json").read_text())
    places = list(_paths(document))
    typed = [p for p in places if _typed(p)]
    assert len(typed) > 60, "the sample run.json should exercise much of the contract"
    for path in places:
        hostile = _hostile(path, _value_at(document, path))
        (run_dir / "run.json").write_text(json.dumps(_with(document, path, hostile)))
        if not _typed(path):  # inside an open map (config, errors by class): read as it is
            load_run(run_dir)
            continue
        with pytest.raises(RunLoadError) as raised:
            load_run(run_dir)
        message = str(raised.value)
        assert message.startswith(f"{run_dir / 'run.json'}: "), message
        assert "\n" not in message and len(message) < 400, message
        assert _contract_path(path) in message or not path, message


def _value_at(document: Any, path: tuple) -> Any:
    value = document
    for key in path:
        value = value[key]
    return value


#: Hostile run.json files: the place changed (a path into the sample) and the new value.
HOSTILE = [
    ((), []),
    ((), "run"),
    ((), None),
    (("summary",), []),
    (("summary", "requests"), "12"),
    (("summary", "ops", 0), []),
    (("summary", "ops", 0, "latency", "p99_ns"), "fast"),
    (("summary", "phases", 0, "workers"), [1]),
    (("client", "cores"), "2"),
    (("host",), "vm"),
    (("schema_version",), "1"),
    (("records", "segments"), {}),
    (("summary", "workers", "started"), 10**30),
    (("summary", "throughput_rps"), float("inf")),
    (("summary", "workers", "phases", 0), {}),
    (("thresholds",), [{"threshold": "p99<1s"}]),
]

#: Odd but well-typed run.json files — a field missing, an open map emptied or odd — are read.
ODD = [
    (("client",), None),
    (("config",), {}),
    (("summary", "errors"), {"reset": "many"}),
]


@pytest.mark.parametrize("command", ["summary", "explain", "report", "compare"])
def test_hostile_run_json_is_one_line_and_exit_2_for_every_command(
    command: str, tmp_path: Path, run_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    args = {
        "summary": ["summary", str(run_dir)],
        "explain": ["explain", str(run_dir)],
        "report": ["report", str(run_dir), "-o", str(tmp_path / "r.html")],
        "compare": ["compare", str(BASELINE), str(run_dir)],
    }[command]
    document = json.loads((run_dir / "run.json").read_text())
    for path, value in HOSTILE:
        (run_dir / "run.json").write_text(json.dumps(_with(document, path, value)))
        code = main(args)
        err = capsys.readouterr().err
        assert code == 2, (path, value, err)
        assert len(err.strip().splitlines()) == 1, err
        assert err.startswith(f"loadgen-analyze: error: {run_dir / 'run.json'}: "), err
        assert "unexpected" not in err, err
        assert not (tmp_path / "r.html").exists()
    for path, value in ODD:
        (run_dir / "run.json").write_text(json.dumps(_with(document, path, value)))
        code = main(args)
        err = capsys.readouterr().err
        assert code in (0, 1), (path, value, err)
