"""The errors the package raises for input a user can fix, in a leaf module.

Every module that reads runs (:mod:`.io.load` for directories, :mod:`.io.s3` for ``s3://``
URLs) raises :class:`RunLoadError`; keeping it here lets both import it without importing each
other. ``loadgen_analysis.RunLoadError`` is the documented name. Also how an
:class:`OSError` on a path the user gave is told (:func:`os_error_text`).
"""

from __future__ import annotations

from pathlib import Path


class RunLoadError(ValueError):
    """A run directory cannot be read: missing, empty, or written in an unknown schema."""


def os_error_text(exc: OSError) -> str:
    """``cannot write /proc/r.html: Permission denied`` and the like, in one line."""
    path = exc.filename if exc.filename is not None else ""
    reason = exc.strerror or str(exc)
    if not path:
        return reason
    return f"cannot use {path}: {reason}; check the path (and that its folder is writable)"


def check_writable(path: Path) -> None:
    """Raise the :class:`OSError` writing ``path`` would raise, now, before minutes of work
    (figures, a whole report) end on it. Its folders are made; a file that was not there is
    not left behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    existed = path.exists()
    with path.open("a", encoding="utf-8"):
        pass
    if not existed:
        path.unlink()
