"""The errors the package raises for input a user can fix, in a leaf module.

Every module that reads runs (:mod:`.io.load` for directories, :mod:`.io.s3` for ``s3://``
URLs) raises :class:`RunLoadError`; keeping it here lets both import it without importing each
other. ``loadgen_analysis.RunLoadError`` is the documented name.
"""

from __future__ import annotations


class RunLoadError(ValueError):
    """A run directory cannot be read: missing, empty, or written in an unknown schema."""
