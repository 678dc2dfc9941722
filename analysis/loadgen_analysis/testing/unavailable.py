"""What a test does when something it needs is missing (a program such as node_exporter,
nginx or Chromium; a cgroup CPU controller; network namespaces).

It fails, so a green run says the test ran — unless the test command could not provide it:
``scripts/test.sh`` names what it could not install in ``LOADGEN_TEST_UNAVAILABLE`` (keys,
comma-separated; ``scripts/test-tools.sh`` lists them), and only then is the test skipped with
its reason; the test command lists every skip in its last lines.
"""

from __future__ import annotations

import os

import pytest

#: The keys scripts/test-tools.sh may declare unavailable (loadgen/tests/common/unavailable.rs
#: holds the same list for the Rust tests).
KEYS = (
    "prometheus",
    "node_exporter",
    "nginx",
    "chromium",
    "curl",
    "taskset",
    "cgroup",
    "netns",
    "tbf",
    "zoo",
    "shared",
)


def declared() -> set[str]:
    """The keys the test command said it could not provide."""
    text = os.environ.get("LOADGEN_TEST_UNAVAILABLE", "")
    return {key.strip() for key in text.split(",") if key.strip()}


def missing(key: str, why: str) -> None:
    """Ends the current test because ``key`` is missing (``why``): a skip when the test command
    declared it unavailable, else a failure that says how to provide it."""
    assert key in KEYS, key
    if key in declared():
        pytest.skip(f"{key} unavailable: {why}")
    pytest.fail(
        f"{why}. scripts/test.sh installs or sets it up (as root, with apt-get); where it "
        f"cannot be had, run with LOADGEN_TEST_UNAVAILABLE={key} to skip this test",
        pytrace=False,
    )
