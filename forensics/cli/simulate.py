"""`forensics simulate`: write a simulated incident bundle and its ground truth (see forensics.simulate)."""

from __future__ import annotations

from pathlib import Path

import typer

from forensics.cli.app import app


@app.command()
def simulate(
    out: Path = typer.Argument(..., help="Output folder: OUT/bundle and OUT/truth are written."),  # noqa: B008
    seed: int = typer.Option(0, "--seed", help="RNG seed; same seed and options give byte-identical files."),
    requests: int | None = typer.Option(None, "--requests", help="Client requests (default 2000; incident 4000)."),
    page_size: int | None = typer.Option(None, "--page-size", help="KV page size in tokens (16; incident 64)."),
    preset: str = typer.Option("default", "--preset", help="default (small, fast) or incident (GLM-5.3 sample)."),
    context_len: int | None = typer.Option(None, "--context-len", help="Model context length in tokens."),
    prefill_pool: int | None = typer.Option(None, "--prefill-pool", help="Prefill KV pool size in token slots."),
    decode_pool: int | None = typer.Option(None, "--decode-pool", help="Decode KV pool size in token slots."),
    abort_rate: float | None = typer.Option(None, "--abort-rate", help="Share of requests the client aborts."),
    long_rate: float | None = typer.Option(None, "--long-rate", help="Share of customer prompts too long for prefill."),
    no_telemetry: str | None = typer.Option(None, "--no-telemetry", help="Decode node without page events ('' none)."),
    gap_node: str | None = typer.Option(None, "--gap-node", help="Node whose page events lose a block."),
    gap_events: int = typer.Option(0, "--gap-events", help="Consecutive page events dropped on --gap-node."),
    gap_at: float = typer.Option(0.5, "--gap-at", help="Where the gap starts, as a fraction of that node's events."),
    clock_skew: int | None = typer.Option(
        None, "--clock-skew", help="Draw each node's clock offset from [-N, +N] ms (default: fixed offsets)."
    ),
    late_clear: int | None = typer.Option(
        None, "--late-clear", help="Keep late landings N ms clear of other events on their slots (50; 0: never)."
    ),
    read_delay: float | None = typer.Option(
        None, "--read-delay", help="Decode reads a landed transfer N to 2N ms later (default 0.2 to 2 ms)."
    ),
    decode_reuse: str | None = typer.Option(
        None, "--decode-reuse", help="How decode nodes reuse freed pages: coalesce (default), lifo, deferred."
    ),
    dark_aborts: bool = typer.Option(
        False, "--dark-aborts", help="Aborted requests may go to the decode node without page telemetry."
    ),
    prefill_nodes: int | None = typer.Option(None, "--prefill-nodes", help="Prefill nodes (default 2)."),
    decode_nodes: int | None = typer.Option(None, "--decode-nodes", help="Decode nodes (default 3)."),
    gateway_format: str | None = typer.Option(
        None,
        "--gateway-format",
        help="Gateway log as written by: kvf (the spec's, default), litellm_spendlogs, litellm_payload, smg, "
        "envoy, otlp.",
    ),
) -> None:
    """Write a simulated incident bundle and its ground truth."""
    from forensics.errors import InputError
    from forensics.simulate import build_config
    from forensics.simulate import simulate as run

    try:
        cfg = build_config(
            preset,
            seed=seed,
            requests=requests,
            page_size=page_size,
            context_len=context_len,
            prefill_pool=prefill_pool,
            decode_pool=decode_pool,
            abort_rate=abort_rate,
            long_rate=long_rate,
            no_telemetry=no_telemetry,
            gap_node=gap_node,
            gap_events=gap_events,
            gap_at=gap_at,
            clock_skew_ms=clock_skew,
            late_clear_ms=late_clear,
            read_delay_ms=read_delay,
            decode_reuse=decode_reuse,
            dark_aborts=dark_aborts or None,
            prefill_count=prefill_nodes,
            decode_count=decode_nodes,
            gateway_format=gateway_format,
        )
    except ValueError as err:  # an option the user can correct
        raise InputError(f"simulate: {err}") from err
    s = run(out, cfg)
    typer.echo(
        f"wrote {out}/bundle and {out}/truth: {s['requests']} requests, {s['placeholders']} placeholders, "
        f"{s['aborts']} aborts, {s['exposed_responses']} exposed responses, "
        f"{s['affected_customer_responses']} affected customer responses"
    )
