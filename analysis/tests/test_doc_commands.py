"""Every runnable command in the docs runs (docs/README.md, "These pages are tested").

One test per Markdown page: its ``sh`` blocks run in order in one scratch directory (with the
checkout's ``data/`` and ``analysis/`` linked in), ``loadgen`` and ``loadgen-server`` the debug
binaries on the PATH, ``loadgen-analyze`` and ``papermill`` this venv's; a reference server
stands in for the documented addresses. Each block has a time cap, so a doc example that grew
to minutes fails here rather than slowing CI. ``sh no-run`` blocks are checked with
``bash -n``. Set ``DOC_COMMANDS_TIMES=FILE`` to append each block's wall time to FILE.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from loadgen_analysis.testing import doc_commands, harness

REPO = Path(__file__).resolve().parents[2]
BLOCK_TIMEOUT_S = 90.0
PAGES = doc_commands.pages(REPO)


@pytest.fixture(scope="session")
def bin_dir(tmp_path_factory: pytest.TempPathFactory, binaries) -> Path:
    """``loadgen`` and ``loadgen-server`` by name, as the docs call them."""
    directory = tmp_path_factory.mktemp("doc-bin")
    (directory / "loadgen").symlink_to(binaries.loadgen)
    (directory / "loadgen-server").symlink_to(binaries.server)
    return directory


def _environment(bin_dir: Path) -> dict[str, str]:
    path = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), os.environ["PATH"]])
    return {**os.environ, "PATH": path, "NO_COLOR": "1"}


def _run_block(block: doc_commands.Block, url: str, cwd: Path, env: dict[str, str]) -> float:
    script = doc_commands.substitute(block.text, url)
    started = time.monotonic()
    try:
        proc = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", script],
            cwd=cwd,
            env=env,
            capture_output=True,
            timeout=BLOCK_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{block.where}: still running after {BLOCK_TIMEOUT_S:.0f} s:\n{script}")
    elapsed = time.monotonic() - started
    assert proc.returncode == block.exit_code, (
        f"{block.where}: exit {proc.returncode}, documented {block.exit_code}:\n{script}\n"
        f"stdout:\n{proc.stdout.decode(errors='replace')[-3000:]}\n"
        f"stderr:\n{proc.stderr.decode(errors='replace')[-3000:]}"
    )
    return elapsed


def _record_time(block: doc_commands.Block, elapsed: float) -> None:
    times = os.environ.get("DOC_COMMANDS_TIMES")
    if times:
        with Path(times).open("a") as out:
            out.write(f"{block.where}\t{block.commands()}\t{elapsed:.2f}\n")


@pytest.mark.parametrize("page", PAGES, ids=[str(p) for p in PAGES])
def test_the_pages_commands_run(page: Path, bin_dir: Path, binaries, tmp_path: Path) -> None:
    blocks = doc_commands.sh_blocks(REPO, page)
    for name in ("data", "analysis"):
        (tmp_path / name).symlink_to(REPO / name)
    env = _environment(bin_dir)
    with ExitStack() as servers:
        url = ""
        for block in blocks:
            if block.kind == "no-run":
                continue
            if block.kind == "server" or not url:
                args = doc_commands.server_args(block) if block.kind == "server" else []
                server = harness.Server(args, binary=binaries.server)
                url = servers.enter_context(server).url
                if block.kind == "server":
                    continue
            _record_time(block, _run_block(block, url, tmp_path, env))


@pytest.mark.parametrize("page", PAGES, ids=[str(p) for p in PAGES])
def test_the_pages_outside_world_commands_parse(page: Path) -> None:
    for block in doc_commands.sh_blocks(REPO, page):
        if block.kind != "no-run":
            continue
        proc = subprocess.run(["bash", "-n"], input=block.text.encode(), capture_output=True)
        assert proc.returncode == 0, f"{block.where}: {proc.stderr.decode()}\n{block.text}"


def test_every_relative_link_of_the_docs_resolves() -> None:
    broken = []
    for page in [REPO / "README.md", *REPO.glob("docs/**/*.md"), *REPO.glob("deploy/**/*.md")]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            remote = target.startswith(("http://", "https://"))
            if not remote and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(REPO)}: {target}")
    assert not broken, broken


def test_the_readme_is_short_and_maps_every_docs_page() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    for page in sorted(REPO.glob("docs/**/*.md")):
        name = str(page.relative_to(REPO))
        assert name in readme, f"README.md's map of docs/ does not name {name}"
