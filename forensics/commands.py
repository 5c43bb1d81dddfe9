"""Commands beyond ingest/investigate, each defined in its own `cmd_*` module (a thin wrapper
around one module function). Importing them here registers them on the app (forensics.app)."""

from __future__ import annotations

from forensics import cmd_audit, cmd_cohorts, cmd_simulate

COMMAND_MODULES = (cmd_simulate, cmd_audit, cmd_cohorts)
