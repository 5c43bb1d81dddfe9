"""What the jobs return: the result of an ingest (IngestResult) and of an investigation
(InvestigationResult), each with its summary for the terminal and, for an investigation, for scripts
(--json)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forensics.findings.bounds import ranged, split
from forensics.findings.damage import damage_line, lost_phrase
from forensics.ingest import in_place_note
from forensics.intake import BundleConfig, InputFile
from forensics.ownership import NodeRun


@dataclass
class IngestResult:
    db: Path
    files: list[InputFile]
    config: BundleConfig
    counts: dict[str, int] = field(default_factory=dict)
    nodes: list[tuple] = field(default_factory=list)
    self_contained: bool = False

    def summary(self) -> str:
        lines = [f"Ingested into {self.db}"]
        for src in ("gateway", "engine_log", "engine_requests", "pages"):
            fs = [f for f in self.files if f.source == src]
            if fs:
                lines.append(
                    f"  {src:16} {len(fs):3} file(s)  read {sum(f.rows_read for f in fs):>10,}  "
                    f"loaded {sum(f.rows_loaded for f in fs):>10,}  "
                    f"rejected {sum(f.rows_rejected for f in fs):>8,}"
                )
        for f in self.files:  # what ingest alone knows of each loss (investigate estimates what cut streams lost)
            for d in f.damage:
                lines.append(_printable(f"  DAMAGED {f.rel}: {d.detail} ({lost_phrase(d.records_lost, d.lost_basis)})"))
            if f.error and not f.damage:
                lines.append(f"  UNREADABLE {f.rel}: {f.error}")
        if self.nodes:
            lines.append("  nodes: node, role, pool tokens, page size, context length, page events")
            for n in self.nodes:
                lines.append("    " + ", ".join("-" if v is None else str(v) for v in n))
        lines.append(in_place_note(self.self_contained))
        return "\n".join(lines)


def _part(h: dict[str, int], name: str) -> tuple[int, int]:
    """A count of the headline as (least, most): the least that response_bounds allows, the count the most."""
    return h[f"{name}_least"], h[name]


def _printable(text: str) -> str:
    """A line of the summary as the terminal may show it: account ids, file paths and column names come
    from the evidence, and no control character of theirs (a terminal escape) reaches the terminal."""
    return "".join(c if c.isprintable() else "?" for c in text)


@dataclass
class InvestigationResult:
    out: Path
    counts: dict[str, int]
    headline: dict[str, int]
    tasks: dict[str, Any] | None = None  # per-node tasks run and reused, their workers and threads, when apart
    self_contained: bool = False
    execution: NodeRun | None = None  # what the per-node work ran (forensics.ownership.execution.nodes)
    source_tiers: dict[str, Any] | None = None  # what the evidence measured of the likely subset (source_tier)
    # what the page evidence measured of each indeterminate tier without it (tier_reliability)
    tier_reliability: list[dict[str, Any]] = field(default_factory=list)
    possible_pairs: dict[str, Any] | None = None  # the possible pairs counted, and whether their CSV was written
    threads: int | None = None  # the run's own DuckDB threads: ingest, findings and the allocator model's walks
    damage: list[dict[str, Any]] = field(default_factory=list)  # evidence_damage's rows (forensics.findings.damage)
    # rules on client-controlled fields alone that moved customers out of the customer cohort (cohorts.preview)
    cohort_warnings: list[str] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)  # what an earlier run killed outright left, settled

    def summary(self) -> str:
        h = self.headline
        # every loss first: the counts below hold only for the evidence that could be read
        lines = [*self.recovered]
        lines += [_printable(damage_line(d)) for d in self.damage] or ["No damage found in the evidence read."]
        lines += [
            f"Affected responses: {ranged(h['affected_least'], h['affected'], grouped=False)} ("
            + split(_part(h, "confirmed"), _part(h, "indeterminate"), grouped=False)
            + f"); customer cohort: {ranged(h['customer_least'], h['customer'], grouped=False)} ("
            + split(_part(h, "customer_confirmed"), _part(h, "customer_indeterminate"), grouped=False)
            + ": they may have been affected)"
            + (f"; account unknown (no gateway record): {h['unknown_account']}" if h.get("unknown_account") else "")
            + (
                f"; up to {h['possible_overlap']} "
                + ("row may be" if h["possible_overlap"] == 1 else "rows may each be")
                + " the same response as another (response_overlap: "
                "rooms no gateway record names, records that name no room): each count is the distinct "
                "responses, at least to at most"
                if h["possible_overlap"]
                else ""
            ),
            f"Exposure pairs proven by page events: {h['pairs']}; hazards: {self.counts.get('hazards.csv', 0)}; "
            f"rejected input rows: {self.counts.get('rejected.csv', 0)}",
        ]
        tier = self.source_tiers or {}
        if tier.get("reason"):
            lines.append(
                f"Possible sources: likely subset printed ({tier['reason']})"
                if tier["likely_printed"]
                else f"Possible sources: no likely count ({tier['reason']})"
            )
        pairs = self.possible_pairs or {}
        if pairs.get("pairs"):
            lines.append(
                f"Possible (response, source) pairs: {pairs['pairs']:,}; possible_sources.csv "
                + ("written" if pairs["written"] else "not written")
                + f" ({pairs['why']})"
            )
        if self.tasks:
            lines.append(f"Per-node tasks: {self.tasks['tasks_run']} run, {self.tasks['reused']} reused from the cache")
        lines += ["Warning: " + _printable(w) for w in self.cohort_warnings]
        lines += [f"Findings written to {self.out}/", f"Report: {self.out / 'report.html'}"]
        return "\n".join([*lines, in_place_note(self.self_contained)])

    def to_json(self) -> str:
        """The summary for scripts: the evidence's damage first, then the headline, the row count of every
        file written, where they are."""
        rest = json.dumps(
            {
                "out": str(self.out),
                "report": str(self.out / "report.html"),
                "database": str(self.out / "incident.duckdb"),
                "headline": self.headline,
                "rows": self.counts,
                "per_node_tasks": self.tasks,
                "source_tiers": self.source_tiers,
                "tier_reliability": self.tier_reliability,
                "possible_pairs": self.possible_pairs,
                "self_contained": self.self_contained,
                "threads": self.threads,
                "cohort_warnings": self.cohort_warnings,
                "recovered": self.recovered,
            },
            sort_keys=True,
            default=str,
        )
        return '{"evidence_damage": ' + json.dumps(self.damage, sort_keys=True, default=str) + ", " + rest[1:]
