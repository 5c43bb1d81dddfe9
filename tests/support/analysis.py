"""Run the analysis on a bundle into an in-memory DuckDB and read findings back as plain rows."""

from __future__ import annotations

from pathlib import Path

from forensics.db import connect
from forensics.intake import Window
from forensics.ownership import Execution
from forensics.pipeline import analyze
from forensics.run import load_run


class Findings:
    def __init__(self, bundle: Path, execution: Execution | None = None, window: Window | None = None):
        self.con = connect(":memory:")
        analyze(self.con, load_run(bundle, execution=execution, window=window))

    def rows(self, query: str) -> list[tuple]:
        return self.con.execute(query).fetchall()

    def affected(self) -> dict[str, tuple]:
        return {
            r[0]: r[1:]
            for r in self.rows("SELECT request_id, status, evidence, kinds, exposed_slots FROM affected_responses")
        }

    def exposures(self) -> set[tuple]:
        return set(
            self.rows("SELECT recipient_request_id, source_request_id, node, kind, slots, status FROM exposures")
        )

    def hazards(self) -> set[tuple]:
        return set(self.rows("SELECT node, room, kind, slots FROM hazards"))
