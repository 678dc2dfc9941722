"""The deployment files a user applies as they are: deploy/kubernetes and the Dockerfile.

Checks what a broken edit would silently get wrong: the shard count in three places, the
scenario's mount path, variables the container args use, the manifests against the
Kubernetes schemas (offline), the scenario against the real loadgen, and the image's build
command and entry point.
"""

from __future__ import annotations

import fnmatch
import json
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import yaml

from loadgen_analysis.testing import harness

from .conftest import Binaries

REPO = harness.REPO_ROOT
KUBE = REPO / "deploy" / "kubernetes"
MANIFESTS = ("configmap.yaml", "job.yaml", "serviceaccount.yaml")
VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((KUBE / name).read_text()) if d is not None]


def one(name: str, kind: str) -> dict[str, Any]:
    found = [d for d in documents(name) if d["kind"] == kind]
    assert len(found) == 1, f"{name}: expected one {kind}, found {len(found)}"
    return found[0]


def job() -> dict[str, Any]:
    return one("job.yaml", "Job")


def container() -> dict[str, Any]:
    (only,) = job()["spec"]["template"]["spec"]["containers"]
    return only


def env() -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container().get("env", [])}


def expand(arg: str, values: dict[str, str]) -> str:
    """Kubernetes' `$(VAR)` expansion in container args."""
    return VAR.sub(lambda m: values.get(m.group(1), m.group(0)), arg)


def scenario_path() -> tuple[str, str]:
    """(the scenario path the args read, the ConfigMap key mounted there)."""
    spec = job()["spec"]["template"]["spec"]
    path = container()["args"][1]
    volumes = {v["name"]: v for v in spec["volumes"]}
    for mount in container()["volumeMounts"]:
        prefix = mount["mountPath"].rstrip("/") + "/"
        config_map = volumes[mount["name"]].get("configMap")
        if path.startswith(prefix) and config_map:
            assert config_map["name"] == "loadgen-scenario"
            return path, path.removeprefix(prefix)
    raise AssertionError(f"no ConfigMap volume is mounted where the args read {path}")


def test_kustomization_lists_every_manifest() -> None:
    kustomization = yaml.safe_load((KUBE / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == sorted(MANIFESTS)
    on_disk = {p.name for p in KUBE.glob("*.yaml")} - {"kustomization.yaml"}
    assert on_disk == set(MANIFESTS)
    for name in MANIFESTS:
        for doc in documents(name):
            assert doc["apiVersion"] and doc["kind"] and doc["metadata"]["name"], name


def test_shard_count_is_the_same_in_all_three_places() -> None:
    spec = job()["spec"]
    shards = int(env()["SHARDS"]["value"])
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] == shards
    args = container()["args"]
    assert args[args.index("--shard") + 1] == "$(JOB_COMPLETION_INDEX)/$(SHARDS)"


def test_a_failed_shard_is_never_retried() -> None:
    # A retried pod would send its slice of the load a second time.
    spec = job()["spec"]
    assert spec["backoffLimit"] == 0
    assert spec["template"]["spec"]["restartPolicy"] == "Never"


def test_every_variable_in_the_args_is_defined() -> None:
    defined = env()
    used = {name for arg in container()["args"] for name in VAR.findall(arg)}
    assert used == {"JOB_COMPLETION_INDEX", "SHARDS", "START_AT", "OUT"}
    assert used <= defined.keys()
    index = defined["JOB_COMPLETION_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert index == "metadata.annotations['batch.kubernetes.io/job-completion-index']"


def test_the_scenario_is_mounted_where_the_args_read_it() -> None:
    path, key = scenario_path()
    assert path == "/etc/loadgen/scenario.toml"
    scenario = one("configmap.yaml", "ConfigMap")
    assert scenario["metadata"]["name"] == "loadgen-scenario"
    assert key in scenario["data"]
    tomllib.loads(scenario["data"][key])


def test_pods_run_as_the_service_account_and_get_guaranteed_cpu() -> None:
    account = one("serviceaccount.yaml", "ServiceAccount")
    assert job()["spec"]["template"]["spec"]["serviceAccountName"] == account["metadata"]["name"]
    assert "eks.amazonaws.com/role-arn" in account["metadata"]["annotations"]
    resources = container()["resources"]
    assert resources["requests"] == resources["limits"]
    assert {"cpu", "memory"} <= resources["limits"].keys()


def test_the_run_can_be_staged_on_a_read_only_root() -> None:
    # With --out s3://, loadgen writes the run under the temp dir before uploading each file.
    assert container()["securityContext"]["readOnlyRootFilesystem"] is True
    volumes = {v["name"]: v for v in job()["spec"]["template"]["spec"]["volumes"]}
    mounts = {m["mountPath"]: m for m in container()["volumeMounts"]}
    assert "emptyDir" in volumes[mounts["/tmp"]["name"]]
    assert not mounts["/tmp"].get("readOnly")


def validate(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubernetes_validate", "--strict", "--quiet", *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_manifests_match_the_kubernetes_schemas(tmp_path: Path) -> None:
    # With a misspelt copy of job.yaml alongside, so the check is shown not to be vacuous;
    # one run, as loading the schemas takes seconds.
    broken = tmp_path / "job.yaml"
    broken.write_text((KUBE / "job.yaml").read_text().replace("parallelism:", "paralelism:"))
    proc = validate(*(KUBE / name for name in MANIFESTS), broken)
    assert proc.returncode != 0
    # Any line about the real files is a failure or a warning (e.g. a kind it has no
    # schema for, and so did not check).
    lines = (proc.stdout + proc.stderr).splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"ERROR {broken} ")
    assert "'paralelism' was unexpected" in lines[0]


def test_the_job_args_run_the_configmap_scenario(binaries: Binaries, tmp_path: Path) -> None:
    """The Job's own args, with the scenario from the ConfigMap, run the last shard against a
    real server; only the sizes are shrunk and the target and output are local."""
    path, key = scenario_path()
    scenario = tmp_path / "scenario.toml"
    scenario.write_text(one("configmap.yaml", "ConfigMap")["data"][key])
    shards = int(env()["SHARDS"]["value"])
    out = tmp_path / "run"
    values = {
        "JOB_COMPLETION_INDEX": str(shards - 1),
        "SHARDS": str(shards),
        "START_AT": str(int(time.time() * 1000) + 300),  # Unix milliseconds
        "OUT": str(out),
    }
    args = [expand(a, values) for a in container()["args"]]
    args[args.index(path)] = str(scenario)
    # The scenario's producer-buffer sizes, shrunk: 10 requests per shard.
    bounds = {
        "total": 10 * shards,
        "buffer": 10 * shards,
        "initial_workers": shards,
        "requests_per_worker": 5,
        "max_workers": 2 * shards,
    }
    sets = [a for k, v in bounds.items() for a in ("--set", f"model.{k}={v}")]
    with harness.Server(binary=binaries.server) as server:
        proc = subprocess.run(
            [str(binaries.loadgen), *args, "--url", server.url + "/", *sets],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert proc.returncode == 0, proc.stderr
    run = json.loads((out / "run.json").read_text())
    assert run["shard"] == f"{shards - 1}/{shards}"
    assert (run["summary"]["requests"], run["summary"]["failed"]) == (10, 0)


def test_the_image_builds_the_readme_binary_and_runs_it() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    (build,) = re.findall(r"^RUN (cargo build .*)$", dockerfile, re.M)
    # The README's build command, plus --locked (what CI tested) and the one package needed.
    assert "cargo build --release" in (REPO / "README.md").read_text()
    assert build == "cargo build --release --locked -p loadgen"
    package = tomllib.loads((REPO / "loadgen" / "Cargo.toml").read_text())
    assert package["package"]["name"] == "loadgen"
    assert {b["name"] for b in package["bin"]} >= {"loadgen"}

    (copy,) = re.findall(r"^COPY --from=build (\S+) (\S+)$", dockerfile, re.M)
    assert copy == ("/src/target/release/loadgen", "/usr/local/bin/loadgen")
    assert re.search(r"^WORKDIR /src$", dockerfile, re.M)
    (entrypoint,) = re.findall(r"^ENTRYPOINT (.*)$", dockerfile, re.M)
    assert json.loads(entrypoint) == [copy[1]]

    # Build and runtime on the same Debian release (glibc), a toolchain the workspace allows.
    build_image, runtime_image = re.findall(r"^FROM (\S+)", dockerfile, re.M)
    toolchain = re.fullmatch(r"rust:(\d+)\.(\d+)-bookworm", build_image)
    assert toolchain, build_image
    assert runtime_image == "gcr.io/distroless/cc-debian12:nonroot"
    workspace = tomllib.loads((REPO / "Cargo.toml").read_text())
    minimum = tuple(map(int, workspace["workspace"]["package"]["rust-version"].split(".")))
    assert minimum <= tuple(map(int, toolchain.groups()))

    # The build context keeps what the build needs and leaves the 100s of MB of target/ out.
    lines = (REPO / ".dockerignore").read_text().splitlines()
    ignored = [line.rstrip("/") for line in lines if line and not line.startswith("#")]
    assert "target" in ignored
    for needed in ("Cargo.toml", "Cargo.lock", "loadgen", "servers", "tcpinfo"):
        assert not [p for p in ignored if fnmatch.fnmatch(needed, p)], needed
