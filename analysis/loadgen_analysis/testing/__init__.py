"""Helpers for the tests and bench/ scripts only: recording real runs with the built binaries
(:mod:`.harness`), the testbeds whose limit is known (:mod:`.testbeds`) and synthetic runs of
any size (:mod:`.synthetic`).

This subpackage is left out of the wheel (``pyproject.toml``'s ``packages.find`` exclude); it is
importable from a checkout's editable install. Nothing in the production package imports it.
"""
