"""The runnable commands of the Markdown docs: their fenced ``sh`` blocks, and how to run them.

A block's info string says what it is (docs/README.md, "These pages are tested"):

- ``sh`` runs, in order with the page's other blocks, in one scratch directory;
- ``sh server`` is one ``loadgen-server …`` line: it starts that server (on a free port) for
  the page's later blocks, and stops it at the end of the page;
- ``sh exit=N`` runs and must exit with N;
- ``sh no-run`` needs the outside world (EC2, ssh, kubectl, S3, a remote host) or minutes, and
  is only checked with ``bash -n``.

The documented addresses ``127.0.0.1:8080`` and ``10.0.0.5:8080`` stand for the page's
server; this module only parses and substitutes, the test runs.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

#: Markdown files whose ``sh`` blocks are run or linted, relative to the repository root.
DOC_GLOBS = ("README.md", "docs/**/*.md", "deploy/**/*.md", "analysis/README.md")

#: The addresses the docs use for "the server under test".
DOCUMENTED_ADDRESSES = ("http://127.0.0.1:8080", "http://10.0.0.5:8080")

_FENCE = re.compile(r"^```(\S*)(.*)$")


@dataclass(frozen=True)
class Block:
    """One fenced ``sh`` block of a page."""

    page: Path
    line: int
    kind: str  # "run", "server" or "no-run"
    text: str
    exit_code: int = 0

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    def commands(self) -> int:
        """How many commands the block holds: its lines that are not comments, blank or
        continuations of the line before."""
        count, continued = 0, False
        for line in self.text.splitlines():
            stripped = line.strip()
            if stripped and not stripped.startswith("#") and not continued:
                count += stripped not in {"done", "fi", "wait", "}"}
            continued = stripped.endswith("\\")
        return count


def pages(root: Path) -> list[Path]:
    """Every Markdown page with ``sh`` blocks, relative to ``root``, sorted."""
    found = {p for pattern in DOC_GLOBS for p in root.glob(pattern)}
    return sorted(p.relative_to(root) for p in found if sh_blocks(root, p.relative_to(root)))


def sh_blocks(root: Path, page: Path) -> list[Block]:
    """The page's fenced ``sh`` blocks, in order."""
    blocks: list[Block] = []
    lines = (root / page).read_text().splitlines()
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match or not match.group(1):
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), None)
        if end is None:
            raise ValueError(f"{page}:{i + 1}: a fenced block that never ends")
        if match.group(1) == "sh":
            blocks.append(_block(page, i + 1, match.group(2).split(), lines[i + 1 : end]))
        i = end + 1
    return blocks


def _block(page: Path, line: int, words: list[str], body: list[str]) -> Block:
    text = "\n".join(body) + "\n"
    if words == ["no-run"]:
        return Block(page, line, "no-run", text)
    if words == ["server"]:
        return Block(page, line, "server", text)
    if len(words) == 1 and re.fullmatch(r"exit=\d+", words[0]):
        return Block(page, line, "run", text, exit_code=int(words[0].split("=")[1]))
    if not words:
        return Block(page, line, "run", text)
    raise ValueError(f"{page}:{line}: unknown sh block marker {' '.join(words)!r}")


def server_args(block: Block) -> list[str]:
    """A ``sh server`` block's ``loadgen-server`` flags, without ``--port`` and ``--bind``
    (the test picks a free port on 127.0.0.1)."""
    words = shlex.split(block.text, comments=True)
    if not words or words[0] != "loadgen-server":
        raise ValueError(f"{block.where}: a server block is one loadgen-server command")
    args, rest = [], words[1:]
    while rest:
        word = rest.pop(0)
        if word in {"--port", "--bind"}:
            rest.pop(0)
        elif not word.startswith(("--port=", "--bind=")):
            args.append(word)
    return args


def substitute(text: str, url: str) -> str:
    """The block with the documented addresses replaced by ``url`` (no trailing slash)."""
    for address in DOCUMENTED_ADDRESSES:
        text = text.replace(address, url)
    return text
