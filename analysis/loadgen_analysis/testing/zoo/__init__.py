"""The zoo: servers the project did not write (nginx, CPython's ``http.server``, gunicorn,
Node's ``http``, the JDK's ``com.sun.net.httpserver``, Go's ``net/http``), each with a small
handler of ours (the files here) and a truth by construction. :mod:`.stacks` starts them;
:mod:`loadgen_analysis.testing.zoo_testbeds` records and judges runs against them. The handlers
live next to the code that starts them, in the package the tests import, so a test finds them
by path with no install step; Go and Java handlers are compiled at test time into
``target/zoo/<hash of the source>/`` (built once, reused).
"""
