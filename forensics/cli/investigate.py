"""`forensics ingest` and `forensics investigate`: the main job's two commands."""

from __future__ import annotations

from pathlib import Path

import typer

from forensics.cli.app import app, stopped_by_signals
from forensics.contract import POSSIBLE_PAIRS_LIMIT

SELF_CONTAINED = typer.Option(
    False,
    "--self-contained",
    help="Copy the page events and gateway rows into the database, so that it opens without the bundle "
    "(by default it reads the bundle's Parquet files where they lie; the copy costs about a minute per "
    "100M page events).",
)


@app.command()
def ingest(
    bundle: Path = typer.Argument(..., help="Evidence bundle folder (see the evidence-bundle spec)."),
    db: Path = typer.Option(Path("incident.duckdb"), "--db", help="DuckDB database file to write."),
    exclusions: Path | None = typer.Option(None, "--exclusions", help="exclusions.toml overriding the bundle's."),
    self_contained: bool = SELF_CONTAINED,
) -> None:
    """Load a bundle into typed DuckDB tables, with row accounting and a manifest."""
    from forensics.pipeline import ingest_bundle

    result = ingest_bundle(bundle, db, exclusions=exclusions, self_contained=self_contained)
    typer.echo(result.summary())


QUIET = typer.Option(False, "--quiet", "-q", help="No progress display on stderr (it shows only on a terminal).")

INVESTIGATE_EXAMPLES = """Examples:

  forensics investigate evidence/INC-2026-0909 --out cases/INC-2026-0909

  forensics investigate B --out O --as-of 2026-09-10T09:00:00Z   (the deadline clocks count from then)

  forensics investigate B --out O --since 2026-08-27 --until 2026-09-10 --memory-limit 8GB

  forensics investigate B --out O --json | jq .headline

  forensics investigate B --out O --notice-template letter.html.j2   (notices/<account>.html from it)
"""


@app.command(epilog=INVESTIGATE_EXAMPLES)
def investigate(
    bundle: Path = typer.Argument(..., help="Evidence bundle folder."),
    out: Path = typer.Option(..., "--out", help="Output folder for findings and report."),
    exclusions: Path | None = typer.Option(None, "--exclusions", help="exclusions.toml overriding the bundle's."),
    as_of: str | None = typer.Option(None, "--as-of", help="Report 'as of' time (RFC 3339); none by default."),
    memory_limit: str | None = typer.Option(
        None, "--memory-limit", help="DuckDB memory limit, e.g. 8GB (default: half the machine); the rest spills."
    ),
    threads: int | None = typer.Option(
        None,
        "--threads",
        help="Threads the run uses: DuckDB's and those the compiled walks run in, shared among the --workers "
        "(default: all cores).",
    ),
    workers: int = typer.Option(
        0,
        "--workers",
        min=0,
        help="Per-node worker processes; 1 = all nodes in this process; default 0 = auto: one per node up to "
        "the cores on machines with more than 2 cores, else 1.",
    ),
    executor: str = typer.Option(
        "process",
        "--executor",
        help="Where per-node tasks run: process or ray (ray: each node's ownership work, each node's engine "
        "logs read and the allocator model's replays, a Ray task each; README: A 100-node, 14-day incident).",
    ),
    ray_address: str | None = typer.Option(
        None,
        "--ray-address",
        help="With --executor ray: the Ray cluster to join, HOST:PORT of its head (default: start a local "
        "Ray instance). Its machines need the same kv-forensics version, no shared storage.",
    ),
    cache: Path | None = typer.Option(
        None, "--cache", help="Folder of per-node results, reused while a node's inputs are unchanged."
    ),
    since: str | None = typer.Option(
        None,
        "--since",
        help="Replay window start (RFC 3339 or YYYY-MM-DD, UTC); date= partitions before it are not read.",
    ),
    until: str | None = typer.Option(None, "--until", help="Replay window end (exclusive), like --since."),
    full_replay: bool = typer.Option(
        False,
        "--full-replay",
        help="Replay every room in detail, not only the rooms the screening pass flags (same findings, slower; "
        "for checking the screen).",
    ),
    self_contained: bool = SELF_CONTAINED,
    force: bool = typer.Option(
        False,
        "--force",
        help="Write into --out even when it holds another incident's outputs or other files (the other files "
        "are kept: they stay in the new --out).",
    ),
    operator: str | None = typer.Option(
        None, "--operator", help="Who runs the analysis, for the manifest (default: $KVF_OPERATOR, else the login)."
    ),
    sign_key: Path | None = typer.Option(
        None,
        "--sign-key",
        help="The operator's Ed25519 private key (PEM; forensics keygen makes one): OUT/manifest.sig signs the "
        "manifest (default: $KVF_SIGN_KEY, if set). forensics verify OUT checks it.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as one JSON object on stdout."),
    parquet: bool = typer.Option(
        False, "--parquet", help="Also write the large findings tables, typed, as OUT/parquet/<table>.parquet."
    ),
    possible_pairs: bool | None = typer.Option(
        None,
        "--possible-pairs/--no-possible-pairs",
        help="Write possible_sources.csv, every (response, possible source) pair, whatever their number "
        f"(default: up to {POSSIBLE_PAIRS_LIMIT:,} pairs; the windows file and the database's view hold them always).",
    ),
    notice_template: list[Path] | None = typer.Option(
        None,
        "--notice-template",
        help="A per-account notice template (repeatable), instead of the bundled HTML and text ones; "
        "`california` names the bundled California Notice of Data Breach (Civ. Code 1798.82); "
        "`forensics notices OUT --template FILE` renders them again later.",
    ),
    quiet: bool = QUIET,
) -> None:
    """Ingest, rebuild page ownership and provenance, write findings and the disclosure report."""
    from forensics import progress
    from forensics.errors import InputError
    from forensics.ownership.execution.cluster import probe_ray_address
    from forensics.ownership.execution.nodes import EXECUTORS, Execution
    from forensics.pipeline import Custody
    from forensics.pipeline import investigate as run

    if executor not in EXECUTORS:
        raise InputError(f"--executor must be one of {', '.join(EXECUTORS)}, not {executor!r}")
    if ray_address:
        if executor != "ray":
            raise InputError("--ray-address needs --executor ray")
        probe_ray_address(ray_address)
    from forensics.intake import Window

    window = Window.parse(since, until)
    execution = Execution(
        executor=executor, workers=workers, cache=cache, ray_address=ray_address, screen=not full_replay
    )
    custody = Custody(operator=operator, sign_key=sign_key) if operator else Custody(sign_key=sign_key)
    # what forensics.pipeline.investigate's cleanup guarantees when a signal stops the run
    left = f"{out} not created" if not out.exists() else f"{out} left as it was (the run builds beside it)"
    with stopped_by_signals(left), progress.shown(quiet=quiet or as_json):
        result = run(
            bundle,
            out,
            exclusions=exclusions,
            as_of=as_of,
            memory_limit=memory_limit,
            threads=threads,
            execution=execution,
            window=window,
            self_contained=self_contained,
            force=force,
            custody=custody,
            parquet=parquet,
            possible_pairs=possible_pairs,
            notice_templates=notice_template or None,
        )
    typer.echo(result.to_json() if as_json else result.summary())
