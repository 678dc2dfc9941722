"""The HTML building blocks of the reports: the page and its stylesheet, tables from frames,
figures as embedded PNG data URIs, and how a number is shown. Knows nothing of runs."""

from __future__ import annotations

import base64
import html
import io
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..units import count, human_name

CSS = """
body { font-family: -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1150px; color: #222; line-height: 1.4; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ddd;
     padding-bottom: 0.2em; margin-top: 1.8em; }
.meta { color: #666; font-size: 0.9em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.6em 0; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; }
th { background: #f4f4f4; } td:first-child, th:first-child { text-align: left; }
.verdict { padding: 0.8em 1em; border-radius: 6px; background: #eef3fb;
           border-left: 6px solid #4c72b0; margin: 1em 0; }
.verdict.errors, .verdict.client, .verdict.network { border-left-color: #c44e52;
           background: #fbeeee; }
.verdict.server { border-left-color: #dd8452; background: #fdf3ea; }
.status-limit { color: #c44e52; font-weight: bold; }
.status-ok { color: #2e7d32; } .status-not { color: #888; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #666; font-size: 0.85em; }
pre { background: #f7f7f7; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
.note { color: #666; font-size: 0.9em; }
"""


def figure_to_data_uri(fig: Figure, dpi: int = 110) -> str:
    """Render a Figure as a base64 PNG data URI."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


#: While :func:`collect_figures` runs, every figure a report embeds, with its caption.
_COLLECTED: ContextVar[list[tuple[Figure, str]] | None] = ContextVar("collected", default=None)


@contextmanager
def collect_figures() -> Iterator[list[tuple[Figure, str]]]:
    """Collect the figures :func:`figure_html` embeds inside the block (for ``--plots``)."""
    collected: list[tuple[Figure, str]] = []
    token = _COLLECTED.set(collected)
    try:
        yield collected
    finally:
        _COLLECTED.reset(token)


def write_figures(figures: list[tuple[Figure, str]], directory: Path) -> list[Path]:
    """Each figure as ``NN-title.svg`` and ``NN-title.png`` (200 dpi) in ``directory``; the
    SVG's text is text (``svg.fonttype`` ``none``), editable and searchable, not glyph paths."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for i, (fig, caption) in enumerate(figures, start=1):
        title = next((ax.get_title() for ax in fig.axes if ax.get_title()), caption)
        first_line = title.splitlines()[0] if title else caption
        slug = re.sub(r"[^a-z0-9]+", "-", first_line.lower()).strip("-")[:60] or "figure"
        for suffix, dpi in ((".svg", None), (".png", 200)):
            path = directory / f"{i:02d}-{slug}{suffix}"
            with mpl.rc_context({"svg.fonttype": "none"}):
                fig.savefig(path, dpi=dpi)
            written.append(path)
    return written


@contextmanager
def figures_into(directory: Path | None) -> Iterator[list[Path]]:
    """With a ``directory`` (``--plots``): collect the figures embedded inside the block and
    write them there after it; the list it yields then holds the files written. Without one,
    nothing is collected (an enclosing block still collects them)."""
    written: list[Path] = []
    if directory is None:
        yield written
        return
    with collect_figures() as figures:
        yield written
    written += write_figures(figures, Path(directory))


def figures_text(written: list[Path], directory: Path) -> str:
    """What ``--plots`` wrote, for the console: each figure's name once, SVG and PNG."""
    names = list(dict.fromkeys(path.stem for path in written))
    if not names:
        return f"no figures to write into {directory}: this report has none"
    listed = "".join(f"\n  {name}" for name in names)
    return f"wrote {count(len(names), 'figure')} into {directory}, each as .svg and .png:{listed}"


def figure_html(fig: Figure, caption: str) -> str:
    collected = _COLLECTED.get()
    if collected is not None:
        collected.append((fig, caption))
    return (
        f'<figure><img alt="{html.escape(caption)}" src="{figure_to_data_uri(fig)}">'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
    )


def fmt(value: object, digits: int = 3) -> str:
    """A table cell as people read it: ``yes``/``no``, ``—`` for nothing, 3 significant
    digits, thousands separated."""
    if value is None:
        return "—"
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "—"
        if math.isinf(value):
            return "∞"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.{digits}g}"
    return str(value)


def table_html(frame: pd.DataFrame, columns: dict[str, str] | None = None) -> str:
    """``frame`` as an HTML table: ``columns`` picks and names them, else every column under
    its :func:`~..units.human_name`; cells by :func:`fmt`."""
    if columns:
        frame = frame[[c for c in columns if c in frame]].rename(columns=columns)
    else:
        frame = frame.rename(columns=lambda c: human_name(str(c)))
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = []
    for row in frame.itertuples(index=False):
        cells = "".join(f"<td>{html.escape(fmt(v))}</td>" for v in row)
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


#: The last line of every page: where the words the figures use are explained.
GLOSSARY_NOTE = (
    "<p class='note'>Terms (USL and σ/κ/λ, the bounds model, knee N*, N_eff, send lag, "
    "latency from intended send, plateau, closed and open model): <code>loadgen-analyze "
    "glossary</code> prints them (<code>docs/glossary.md</code> in loadgen's documentation).</p>"
)


def page(title: str, body: list[str]) -> str:
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>"
        + "\n".join([*body, GLOSSARY_NOTE])
        + "</body></html>\n"
    )
