"""How the ownership work runs: per-node tasks in this process, in worker processes or on Ray, with a
cache (nodes); threads over receivers (parallel); events streamed out of DuckDB in order (streams)."""
