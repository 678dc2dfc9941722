"""The GitHub Actions workflow of docs/ci.md and examples/ci/loadtest.yml (issue 30): the two
are the same text, the file is a well-formed workflow, and its steps run here as they would on
a runner — baseline, candidate with thresholds, the compare gate, the report — against the
debug binaries, with their JUnit files checked.

Steps that use an action (``uses:``) or set up the machine (named ``Set up: …``: the release
build, ``pip install``) are not run: the binaries and this venv stand in for them. ``-d 5s``
runs for 2 s here, to keep the suite short. GITHUB_PATH and GITHUB_STEP_SUMMARY are files in
the scratch directory, as on a runner.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / "examples" / "ci" / "loadtest.yml"


def _workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def _steps() -> list[dict]:
    (job,) = _workflow()["jobs"].values()
    return job["steps"]


def test_the_docs_show_the_example_workflow_as_it_is() -> None:
    page = (REPO / "docs" / "ci.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", page, re.S)
    assert WORKFLOW.read_text() in blocks, "docs/ci.md must show examples/ci/loadtest.yml verbatim"


def test_the_workflow_is_well_formed() -> None:
    workflow = _workflow()
    # YAML 1.1 reads the key `on` as True; GitHub reads it as the triggers.
    assert set(workflow.get("on") or workflow.get(True)) == {"pull_request", "workflow_dispatch"}
    (job,) = workflow["jobs"].values()
    assert job["runs-on"] and job["timeout-minutes"] <= 90
    names = [s.get("name") for s in job["steps"] if s.get("name")]
    assert len(names) == len(set(names)), names
    for step in job["steps"]:
        assert ("uses" in step) != ("run" in step), step
        if "uses" in step:
            assert re.fullmatch(r"[\w.-]+/[\w.-]+@v\d+", step["uses"]), step["uses"]
        else:
            proc = subprocess.run(["bash", "-n"], input=step["run"], text=True, check=False)
            assert proc.returncode == 0, step["name"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_workflow_steps_run_locally(binaries, tmp_path: Path) -> None:
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed (the 'Start the service' step uses it)")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "loadgen").symlink_to(binaries.loadgen)
    (bin_dir / "loadgen-server").symlink_to(binaries.server)
    work = tmp_path / "checkout"
    work.mkdir()
    env = {
        **os.environ,
        **{k: str(v) for k, v in _workflow()["env"].items()},
        "PORT": str(_free_port()),
        "PATH": os.pathsep.join(
            [str(bin_dir), str(Path(sys.executable).parent), os.environ["PATH"]]
        ),
        "GITHUB_PATH": str(tmp_path / "github_path"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "step_summary.md"),
    }
    try:
        for step in _steps():
            if "uses" in step or step["name"].startswith("Set up:"):
                continue
            script = step["run"].replace("-d 5s", "-d 2s")
            proc = subprocess.run(
                ["bash", "-e", "-o", "pipefail", "-c", script],
                cwd=work,
                env=env,
                capture_output=True,
                text=True,
                timeout=180,
                check=False,
            )
            assert proc.returncode == 0, f"step {step['name']!r}:\n{proc.stdout}\n{proc.stderr}"
    finally:
        pid_file = work / "server.pid"
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGTERM)
    for name in ("baseline", "candidate", "compare"):
        root = ElementTree.parse(work / "junit" / f"{name}.xml").getroot()
        assert int(root.get("tests")) >= 1 and root.get("failures") == "0", name
    assert (work / "report.html").exists() and list((work / "figures").glob("*.svg"))
    assert "verdict" in (tmp_path / "step_summary.md").read_text().lower()
