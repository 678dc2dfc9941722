"""Reading runs: what is on disk (or under ``s3://``), checked against the file contract.

:mod:`.contract` is the one description of every file ``loadgen`` writes; :mod:`.load` loads a
run directory into a :class:`~.run.Run`; :mod:`.shards` joins the shard directories of one
sharded run; :mod:`.s3` mirrors ``s3://`` prefixes to a local cache; :mod:`.engine` hands out the
DuckDB connection on which every reduction runs; :mod:`.outputs` keeps the files a command
writes off the runs it reads. Nothing here aggregates.
"""
