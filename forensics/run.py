"""The Run: one run's settings, each input read and checked once before any work starts (a run that
cannot start leaves no --out behind), then handed down, frozen, to the stages by forensics.pipeline."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from forensics.cohorts import Rule, exclusion_rules
from forensics.db import check_memory_limit
from forensics.errors import InputError
from forensics.intake import BundleConfig, Window, load_bundle_config, parse_utc
from forensics.ownership import Execution


@dataclass(frozen=True)
class Run:
    """One run's settings, each input read and checked once (load_run), before any work starts and
    before --out is made, then handed down: the bundle and its bundle.toml, the exclusions file and its
    rules, the replay window, the report's as-of time and how the work executes."""

    bundle: Path
    config: BundleConfig
    exclusions: Path | None  # the exclusions file the rules came from (None: every request is customer)
    rules: tuple[Rule, ...]
    window: Window = field(default_factory=Window)
    as_of: datetime | None = None  # the report's "as of" (investigate --as-of): no wall-clock time without it
    execution: Execution = field(default_factory=Execution)
    memory_limit: str | None = None
    threads: int | None = None


def load_run(
    bundle: Path,
    exclusions: Path | None = None,
    *,
    window: Window | None = None,
    as_of: str | None = None,
    execution: Execution | None = None,
    memory_limit: str | None = None,
    threads: int | None = None,
) -> Run:
    """The options, the bundle folder, bundle.toml and the exclusions file, each checked (an InputError
    names the first fault) and read once; the run's threads and memory limit hold for the per-node
    tasks too (shared among their workers)."""
    when = check_options(as_of, memory_limit, threads)
    if not bundle.exists():
        raise InputError(f"{bundle}: no such bundle folder")
    if not bundle.is_dir():
        raise InputError(f"{bundle}: not a folder (expected an evidence bundle folder, see the spec)")
    config = load_bundle_config(bundle)
    excl, rules = exclusion_rules(bundle, exclusions)
    execution = execution or Execution()
    threads = threads or execution.threads
    execution = replace(execution, memory_limit=execution.memory_limit or memory_limit, threads=threads)
    return Run(bundle, config, excl, tuple(rules), window or Window(), when, execution, memory_limit, threads)


def check_options(as_of: str | None, memory_limit: str | None, threads: int | None) -> datetime | None:
    """Every option checked before any work starts (not after an hour of analysis)."""
    when = parse_utc(as_of, "--as-of") if as_of else None
    if memory_limit is not None:
        check_memory_limit(memory_limit)
    if threads is not None and threads < 1:
        raise InputError(f"--threads must be at least 1, not {threads}")
    return when
