"""Commands beyond ingest/investigate, each defined in its own `cmd_*` module (a thin wrapper
around one module function). Importing them here registers them on the app."""

from __future__ import annotations

import importlib

for _name in ("cmd_simulate", "cmd_audit", "cmd_cohorts"):
    try:
        importlib.import_module(f"forensics.{_name}")
    except ModuleNotFoundError as _err:  # a command module not written yet
        if _err.name != f"forensics.{_name}":
            raise
