"""The example servers the docs start, shipped in the wheel so that what the docs install runs
them (issue 61): :mod:`.grpc_greeter`, grpcio's gRPC server (``pip install './[examples]'``).

Unlike :mod:`loadgen_analysis.testing` (the tests' and benchmarks' helpers, left out of the
wheel), these are part of the installed package; nothing else in it imports them.
"""
