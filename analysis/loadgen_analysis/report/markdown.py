"""``loadgen-analyze explain --markdown``: the verdict as Markdown that GitHub renders (a job's
step summary, a pull-request comment) — a heading with the verdict, a table of the checks and
their evidence, the phases as a table, the notes as a list.

Built only from the documented keys of ``explain --json`` (``Attribution.explain_dict()``:
run, verdict, strength, summary, rule, numbers, checks[name, status, evidence], notes,
phases), so the engine's decision on a run, a capacity search's and a sweep's render alike.
A value's markup characters (``|``, ``*``, ``_``, …) are escaped and its line breaks become
``<br>``, so no value breaks the table or turns into emphasis.
"""

from __future__ import annotations

import re
from typing import Any

#: Characters Markdown would read as markup (emphasis in ``N*``, a table's ``|``, HTML).
_MARKUP = re.compile(r"([\\`*_\[\]<>|])")


def cell(value: object) -> str:
    """``value`` as text in a table cell or list item: markup characters escaped, so it reads
    as written; line breaks as ``<br>``."""
    text = _MARKUP.sub(r"\\\1", str(value))
    return "<br>".join(line.strip() for line in text.splitlines()) or " "


def table(header: list[str], rows: list[list[object]]) -> list[str]:
    """A GitHub-flavoured Markdown table."""
    lines = ["| " + " | ".join(cell(h) for h in header) + " |"]
    lines.append("|" + "---|" * len(header))
    lines.extend("| " + " | ".join(cell(v) for v in row) + " |" for row in rows)
    return lines


#: Numbers the engine writes as a fraction of one (a share, a utilisation, a rate).
_FRACTIONS = ("_share", "utilisation", "error_rate", "client_cpu_peak")


def measure(name: str, value: object) -> tuple[str, str]:
    """One of the engine's numbers as people read it: ``client_cpu_peak 0.0150003`` →
    (``client cpu peak``, ``1.5%``), ``mean_latency_ns`` → (``mean latency``, ``10.82 ms``),
    ``link_capacity_bps`` → (``link capacity``, ``1 Gbit/s``), every other to 3 significant
    digits."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return name.replace("_", " "), str(value)
    if name.endswith(_FRACTIONS):
        shown = f"{100 * value:.1f}%"
    elif name.endswith("_ns"):
        name, shown = name.removesuffix("_ns"), f"{value / 1e6:.2f} ms"
    elif name.endswith("_bps"):
        name, shown = name.removesuffix("_bps"), f"{value / 1e9:.3g} Gbit/s"
    elif name.endswith("_cores"):
        name, shown = name.removesuffix("_cores"), f"{value:.3g} cores"
    else:
        shown = f"{value:.3g}"
    return name.replace("_", " "), shown


def _measures(document: dict[str, Any]) -> list[list[object]]:
    """The engine's rule and the numbers behind its verdict (one run), as table rows: shares
    as percentages, times in ms (:func:`measure`)."""
    rows: list[list[object]] = [["rule", document["rule"]]] if document.get("rule") else []
    rows += [list(measure(n, v)) for n, v in sorted((document.get("numbers") or {}).items())]
    return rows


def explain_markdown(document: dict[str, Any], traced: int = 0) -> str:
    """The Markdown of an ``explain --json`` ``document``; ``traced``: how many traced requests
    ``explain`` would list (their ids are in ``--json``)."""
    lines = [
        f"### loadgen explain: `{document['run']}`",
        "",
        *(
            [f"**Verdict: {cell(document['line'])}**", "", f"Why: {cell(document['summary'])}"]
            if document.get("line")
            else [
                f"**Verdict: {cell(document['verdict'])}** ({cell(document['strength'])}) — "
                f"{cell(document['summary'])}"
            ]
        ),
        "",
    ]
    checks = [[c["name"], c["status"], c["evidence"]] for c in document.get("checks", [])]
    if checks:
        lines += [*table(["check", "status", "evidence"], checks), ""]
    measures = _measures(document)
    if measures:
        lines += [*table(["measure", "value"], measures), ""]
    phases = [
        [
            p["phase"],
            p["verdict"],
            f"{round(p['workers_alive'], 1):g}",
            f"{p['busy_share']:.0%}",
            f"{p['waiting_share']:.0%}",
        ]
        for p in document.get("phases", [])
    ]
    if phases:
        header = ["phase", "verdict", "workers alive", "busy", "waiting"]
        lines += [*table(header, phases), ""]
    notes = list(dict.fromkeys(document.get("notes", [])))  # a repeated note once
    if notes:
        lines += ["**Notes**", "", *(f"- {cell(note)}" for note in notes), ""]
    if traced:
        lines.append(
            f"{traced} traced requests: their trace ids are in `loadgen-analyze explain --json`."
        )
    return "\n".join(lines).rstrip() + "\n"
