"""``loadgen-analyze notebook NAME RUN… [-o OUT]``: one of the package's notebooks executed
headless (papermill) against any run, into an executed notebook or an HTML page.

Responsible for finding a notebook by name, turning the RUN arguments into that notebook's
papermill parameters, and running it from a scratch directory (so it works from anywhere);
not for what the notebooks compute — they only load, call and plot.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

#: The notebooks shipped with the package (a link to analysis/notebooks in a checkout).
NOTEBOOK_DIR = Path(__file__).resolve().parent / "notebooks"


@dataclass(frozen=True)
class NotebookSpec:
    """A notebook and the parameters its RUN arguments fill, in order: the first
    ``required`` must be given; a later one not given keeps the notebook's default (a sample
    the package ships, or its section skipped with a sentence saying how to get it)."""

    name: str
    runs: tuple[str, ...]
    required: int

    def usage(self) -> str:
        """``sweep_dir [capacity_dir]``: the RUN arguments, optional ones in brackets."""
        return " ".join(run if i < self.required else f"[{run}]" for i, run in enumerate(self.runs))


NOTEBOOKS = (
    NotebookSpec("01-run-overview", ("run_dir",), 1),
    NotebookSpec("02-littles-law", ("sweep_dir", "capacity_dir"), 1),
    NotebookSpec("03-bottleneck-attribution", ("sweep_dir", "client_limited_run"), 1),
    NotebookSpec("04-regression", ("baseline", "candidate", "history_store"), 2),
)


def find(name: str) -> NotebookSpec:
    """The notebook ``name`` names: its full name, its number (``01``) or the rest
    (``run-overview``)."""
    wanted = name.removesuffix(".ipynb")
    for spec in NOTEBOOKS:
        number, _, rest = spec.name.partition("-")
        if wanted in (spec.name, number, rest, str(int(number))):
            return spec
    names = ", ".join(spec.name for spec in NOTEBOOKS)
    raise ValueError(f"no notebook {name!r}; the notebooks are {names}")


def parameters(spec: NotebookSpec, runs: list[str]) -> dict[str, str]:
    """The papermill parameters for ``runs`` (absolute paths; ``s3://`` URLs as given)."""
    if not spec.required <= len(runs) <= len(spec.runs):
        counts = (
            str(spec.required)
            if spec.required == len(spec.runs)
            else f"{spec.required}–{len(spec.runs)}"
        )
        raise ValueError(
            f"notebook {spec.name} takes {counts} runs ({spec.usage()}), not {len(runs)}"
        )
    return {key: _absolute(run) for key, run in zip(spec.runs, runs, strict=False)}


def _absolute(run: str) -> str:
    return run if run.startswith("s3://") else str(Path(run).resolve())


def execute(spec: NotebookSpec, runs: list[str], out: Path) -> Path:
    """Run the notebook with ``runs`` into ``out`` (``.html``: converted; else the executed
    ``.ipynb``). Raises ValueError when papermill is not installed."""
    try:
        import papermill
    except ImportError:
        raise ValueError(
            "running a notebook needs papermill: pip install './[notebooks]' (or papermill "
            "ipykernel)"
        ) from None
    params = parameters(spec, runs)
    source = NOTEBOOK_DIR / f"{spec.name}.ipynb"
    out = out.resolve()
    with tempfile.TemporaryDirectory(prefix="loadgen-notebook-") as scratch:
        executed = out if out.suffix != ".html" else Path(scratch) / f"{spec.name}.ipynb"
        papermill.execute_notebook(
            str(source),
            str(executed),
            parameters=params,
            cwd=scratch,
            kernel_name="python3",
            log_output=False,
            progress_bar=False,
            config=_local_kernel(Path(scratch)),
        )
        if out.suffix == ".html":
            _to_html(executed, out)
    return out


def _local_kernel(scratch: Path):
    """The kernel's channels over Unix sockets in ``scratch`` (jupyter_client's ``ipc``
    transport), not TCP on loopback: nothing else on the machine can connect to the kernel,
    and ipykernel has no reason to warn that it "is running over TCP without encryption"."""
    from traitlets.config import Config

    return Config({"KernelManager": {"transport": "ipc", "ip": str(scratch / "kernel")}})


def _to_html(notebook: Path, out: Path) -> None:
    import nbformat
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_notebook_node(nbformat.read(notebook, as_version=4))
    out.write_text(body)
