"""The house style every figure of the reports shares: a constrained-layout Figure (nothing
cut at its edges), log axes in plain milliseconds and said to be logarithmic, and legends
outside the data, compact — to the right for a figure of stacked panels, below for one of a
single panel, long labels wrapped so no legend takes half the width.

Knows nothing of runs; :mod:`.plots`, :mod:`.server_plots` and :mod:`.capacity` draw with it.
"""

from __future__ import annotations

import textwrap

import matplotlib as mpl
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

#: A legend label longer than this is wrapped onto more lines.
LABEL_WIDTH = 34


def figure(width: float = 9.0, height: float = 4.5, rows: int = 1, sharex: bool = False):
    """A constrained-layout Figure and its column of ``rows`` axes (no pyplot state)."""
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(rows, 1, sharex=sharex, squeeze=False)[:, 0]
    return fig, axes


#: A log axis spanning at most this many decades labels its minor ticks (4, 6, 7, 8, 9 × 10ⁿ)
#: and draws their gridlines; a wider one draws neither, so no gridline goes unlabelled.
DENSE_DECADES = 1.5


def ms_log_yaxis(ax, label: str) -> None:
    """The y axis of ``ax`` on a log scale of latency, labelled ``label (log scale)`` in plain
    milliseconds at 1, 2, 3, 5 × 10ⁿ (``0.5``, ``2``, ``50``), never ``6×10⁰``; over a short
    span (:data:`DENSE_DECADES`) every other gridline labelled too (``40``). Call it once the
    data is drawn, then :func:`log_grid`."""
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_locator(LogLocator(base=10, subs=(4.0, 6.0, 7.0, 8.0, 9.0)))
    dense = FuncFormatter(lambda v, _: f"{v:g}")
    ax.yaxis.set_minor_formatter(dense if _dense(ax) else NullFormatter())
    ax.set_ylabel(log_label(label))


def _dense(ax) -> bool:
    low, high = ax.get_ylim()
    return low > 0 and high / low <= 10**DENSE_DECADES


def log_grid(ax) -> None:
    """Gridlines at the labelled ticks of ``ax``'s log y axis (:func:`ms_log_yaxis`) only."""
    ax.grid(alpha=0.3, which="both" if _dense(ax) else "major")


def log_label(label: str) -> str:
    """An axis label said to be logarithmic: ``latency (ms)`` → ``latency (ms, log scale)``."""
    if label.endswith(")"):
        return label[:-1] + ", log scale)"
    return label + " (log scale)"


def wrapped(label: str) -> str:
    """A legend label wrapped at :data:`LABEL_WIDTH` characters (a longer word stays whole)."""
    return "\n".join(textwrap.wrap(label, LABEL_WIDTH, break_long_words=False)) or label


def _entries(axes) -> tuple[list, list[str]]:
    """The legend entries of ``axes`` in order, each label once."""
    handles, labels = [], []
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    return handles, labels


def legend_below(fig: Figure, handles=None, labels=None) -> None:
    """One legend for the figure, under its axes, labels wrapped, in as many columns as fit
    the figure's width."""
    if handles is None:
        handles, labels = _entries(fig.axes)
    if not handles:
        return
    labels = [wrapped(label) for label in labels]
    longest = max(len(line) for label in labels for line in label.splitlines())
    # A column: the handle (about 0.6 in) and the text at about 0.075 in a character.
    column_in = 0.6 + 0.075 * longest
    columns = max(1, min(len(labels), 3, int(fig.get_figwidth() // column_in)))
    fig.legend(
        handles, labels, loc="outside lower center", ncols=columns, fontsize="small", frameon=False
    )


def legend_right(fig: Figure, handles=None, labels=None) -> None:
    """One legend for the figure, to the right of its axes, labels wrapped."""
    if handles is None:
        handles, labels = _entries(fig.axes)
    if handles:
        fig.legend(
            handles,
            [wrapped(label) for label in labels],
            loc="outside right upper",
            fontsize="small",
        )


def set_title(ax, text: str) -> None:
    """A title that names something of the user's (an op, a series), wrapped to the figure's
    width so a long name is never cut at its edge (about a tenth of an inch a character)."""
    width = max(20, int(ax.figure.get_figwidth() / 0.1))
    ax.set_title("\n".join(textwrap.wrap(text, width, break_long_words=True)))


def colour(i: int) -> str:
    """The i-th colour of matplotlib's cycle (wrapping)."""
    cycle = mpl.rcParams["axes.prop_cycle"].by_key()["color"]
    return cycle[i % len(cycle)]
