"""`forensics simulate`: write a simulated incident bundle and its ground truth (see forensics.simulate);
with --live, then replay its engine logs into a folder over real time (forensics.simulate.live)."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import typer

from forensics.cli.app import app
from forensics.gateway_formats import REGISTRY, TEXT_FORMATS

SIMULATE_EXAMPLES = (
    "--live TARGET: after the simulation, write OUT/bundle's engine logs (engine/<node>/server.log and "
    "requests.jsonl; with --live-pages also pages/*.jsonl) into TARGET as a running cluster would: start-up lines "
    "at once, then each line when its log time comes, --speed times faster, in log-time order across files; exit "
    "when all are written. The default preset's 10 minutes of traffic take about 10 s at --speed 60.\n\n"
    "OUT/truth/live.jsonl (--live-truth) records when each deciding line (start-up, Req Time Stats, transfer "
    "failure, over-length) was written, to measure a watcher's detection latency (format: "
    "forensics/simulate/live.py).\n\n"
    "Examples:\n\n"
    "  forensics simulate sim --requests 150 --live live   (then follow live/ with forensics watch)\n\n"
    "  forensics simulate sim --live live2 --reuse --speed 0 --rotate-every 500   (the same bundle again, at once)"
)


@app.command(epilog=SIMULATE_EXAMPLES)
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
    researcher_rate: float | None = typer.Option(
        None, "--researcher-rate", help="Share of requests from the researcher reproducing the leak."
    ),
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
    release: str | None = typer.Option(
        None,
        "--release",
        help="SGLang release the nodes run, written to bundle.toml [engine] version; its allocators hand out "
        "the pages (default 0.5.11: the newest known release with the placeholder leak).",
    ),
    allocator: str | None = typer.Option(
        None,
        "--allocator",
        help="How decode nodes reuse freed pages: the release's own rule (default; 0.5.4+ in PD mode: "
        "sorted-deferred), fifo (page size 1), lifo (larger pages), sorted-deferred, or coalesce (no release: "
        "the allocator of bundles simulated before the real ones, the committed sample's).",
    ),
    decode_reuse: str | None = typer.Option(None, "--decode-reuse", hidden=True, help="Former name of --allocator."),
    dark_aborts: bool = typer.Option(
        False, "--dark-aborts", help="Aborted requests may go to the decode node without page telemetry."
    ),
    prefill_nodes: int | None = typer.Option(None, "--prefill-nodes", help="Prefill nodes (default 2)."),
    decode_nodes: int | None = typer.Option(None, "--decode-nodes", help="Decode nodes (default 3)."),
    gateway_format: str | None = typer.Option(
        None,
        "--gateway-format",
        help=f"Gateway log as written by: kvf (the spec's, default), {', '.join(REGISTRY)}.",
    ),
    texts: bool = typer.Option(
        False,
        "--texts",
        help=f"Prompt and response texts in the gateway log ({', '.join(TEXT_FORMATS)}).",
    ),
    echo_rate: float | None = typer.Option(
        None,
        "--echo-rate",
        help="With texts (implied): probability that a true exposure pair's response echoes a span of its "
        "source's prompt or output.",
    ),
    echo_noise: float | None = typer.Option(
        None, "--echo-noise", help="Probability that each word of an echoed span is replaced (default 0)."
    ),
    engine: str | None = typer.Option(
        None,
        "--engine",
        help="The engine whose logs the nodes write: sglang (default) or vllm (vLLM 0.33.0's request lines "
        "of the same run, with their kv_transfer_params; docs/vllm-lines.md).",
    ),
    vllm_pd: bool = typer.Option(
        False,
        "--vllm-pd",
        help="With --engine vllm: vLLM's PD path (block pools, NIXL pull, vLLM #52234's leaks), not SGLang's.",
    ),
    cache_salt_rate: float | None = typer.Option(
        None,
        "--cache-salt-rate",
        help="With --vllm-pd: share of accounts whose requests carry a cache_salt (vLLM's per-request field: "
        "no prefix hit across salts; default 0).",
    ),
    decode_prefix_caching: bool = typer.Option(
        False,
        "--decode-prefix-caching",
        help="With --vllm-pd: the decode nodes' prefix cache on (vLLM's default), so NIXL pulls only the blocks "
        "a decode's own cache misses (default off: the bundles of earlier runs).",
    ),
    batch_lines: str | None = typer.Option(
        None,
        "--batch-lines",
        help="Write SGLang's periodic Decode batch / Prefill batch lines as this release prints them: 0.4.9, "
        "0.5.4, 0.5.11, 0.5.23 (default: none).",
    ),
    decode_log_interval: int | None = typer.Option(
        None, "--decode-log-interval", help="With --batch-lines: a decode line every N decode steps (default 40)."
    ),
    integrity_lines: str | None = typer.Option(
        None,
        "--integrity-lines",
        help="Write the engines' integrity lines: canary (SGLang's KV canary violation where a decode read finds "
        "another request's KV in a slot; default: none).",
    ),
    live: Path | None = typer.Option(
        None,
        "--live",
        help="Then replay OUT/bundle's engine logs into this folder over real time (for forensics watch); "
        "it must be new or empty.",
    ),
    speed: float = typer.Option(60.0, "--speed", help="With --live: log seconds per wall second (0: at once)."),
    rotate_every: int | None = typer.Option(
        None, "--rotate-every", help="With --live: rename server.log to server.log.1 every N lines."
    ),
    live_pages: bool = typer.Option(False, "--live-pages", help="With --live: replay pages/*.jsonl too."),
    start_delay: float = typer.Option(
        0.5, "--start-delay", help="With --live: seconds between the start-up lines and the first traffic line."
    ),
    live_truth: Path | None = typer.Option(
        None,
        "--live-truth",
        help="With --live: when each deciding engine line was written, JSON lines (default OUT/truth/live.jsonl).",
    ),
    reuse: bool = typer.Option(
        False,
        "--reuse",
        help="With --live: replay the OUT/bundle already there instead of simulating (the simulation options "
        "are then ignored).",
    ),
    scale: bool = typer.Option(
        False,
        "--scale",
        help="A logs-only bundle at an incident's volume, streamed (forensics/simulate/scale: 16 decode + 8 "
        "prefill nodes of the incident preset over 14 days, no page events; 100M requests in minutes). Takes "
        "--requests (default 100000), --seed (default 1), --prefill-nodes, --decode-nodes, --abort-rate, "
        "--long-rate, --release, --gateway-format (litellm_spendlogs, envoy or both, comma-separated) and the "
        "options marked [scale].",
    ),
    days: int | None = typer.Option(None, "--days", help="[scale] Days of traffic (default 14)."),
    rotation: str | None = typer.Option(
        None, "--rotation", help="[scale] dateext (default, daily), numbered, numbered-gz (gzip), none."
    ),
    text_nodes: str | None = typer.Option(
        None,
        "--text-nodes",
        help="[scale] Nodes logging --log-requests as text lines: odd-decode (default), all, none, or names.",
    ),
    accounts: int | None = typer.Option(None, "--accounts", help="[scale] Accounts (default 3000)."),
    litellm_share: float | None = typer.Option(
        None, "--litellm-share", help="[scale] With both gateways: share of accounts behind LiteLLM (0.7)."
    ),
    oversize_rate: float | None = typer.Option(
        None, "--oversize-rate", help="[scale] Share of prompts over the context: HTTP 400 (0.0005)."
    ),
    spikes_per_day: float | None = typer.Option(None, "--spikes-per-day", help="[scale] Traffic spikes (3)."),
    chunk: int | None = typer.Option(None, "--chunk", help="[scale] Requests per time slice (250000): memory."),
    no_write: bool = typer.Option(False, "--no-write", help="[scale] Render every line, write none (CPU rate)."),
    no_truth: bool = typer.Option(False, "--no-truth", help="[scale] Write no OUT/truth/responses.csv."),
    page_events: str | None = typer.Option(
        None,
        "--page-events",
        help="With --scale: page events instead of the logs (the benchmarks' bundles; forensics/simulate/pages): "
        "uniform (N prefill + N decode nodes by --decode-nodes, default 1, a request per 25 ms tick on each) or "
        "realistic (3 prefill + 4 decode nodes by default; "
        "an incident's shape: fragmented pools, bursts, late transfers of aborts, --no-telemetry's decode node, "
        "the last by default, without page events). Takes --events or --requests, --seed, --decode-nodes, "
        "--prefill-nodes, --page-size, --placeholder-rate and --chunk; realistic also --concurrency, "
        "--abort-rate, --no-telemetry and the pool sizes.",
    ),
    events: int | None = typer.Option(
        None, "--events", help="With --page-events: about this many page events (or --requests)."
    ),
    concurrency: float | None = typer.Option(
        None, "--concurrency", help="With --page-events realistic: mean rooms in flight per decode node (300)."
    ),
    placeholder_rate: float | None = typer.Option(
        None,
        "--placeholder-rate",
        help="With --page-events: share of prompts over the prefill limit (0.01; realistic 0.002).",
    ),
) -> None:
    """Write a simulated incident bundle and its ground truth; with --live, then replay its engine logs live."""
    from forensics.errors import InputError
    from forensics.simulate import build_config
    from forensics.simulate import simulate as run
    from forensics.simulate.pages.options import PAGES_ONLY
    from forensics.simulate.scale.options import FLAGS, SCALE_ONLY

    # the flags given (a bool when set; --preset unless default), for --scale's check (options.from_cli)
    values = locals()
    names = FLAGS + tuple(f.removeprefix("--").replace("-", "_") for f in PAGES_ONLY)
    flags = {"--" + n.replace("_", "-"): values[n] for n in names if values[n] is not None and values[n] is not False}
    flags |= {} if preset == "default" else {"--preset": preset}
    if scale and page_events is not None:
        _pages(out, flags)
        return
    given = [n for n in PAGES_ONLY if n in flags]
    if given:
        raise InputError(f"simulate: {', '.join(given)} only go(es) with --scale --page-events")
    if scale:
        _scale(out, flags)
        return
    given = [n for n in SCALE_ONLY if n in flags]
    if given:
        raise InputError(f"simulate: {', '.join(given)} only go(es) with --scale")
    if live is None:
        given = [n for n, v in (("--rotate-every", rotate_every), ("--live-truth", live_truth)) if v is not None]
        given += [n for n, v in (("--live-pages", live_pages), ("--reuse", reuse)) if v]
        if given:
            raise InputError(f"simulate: {', '.join(given)} only go(es) with --live TARGET")
    else:  # before simulating: a mistake shows at once
        _check_live(live, speed, rotate_every, start_delay)
    if reuse and not (out / "bundle" / "engine").is_dir():
        raise InputError(f"simulate: --reuse: no {out}/bundle/engine to replay (run without --reuse first)")
    if not reuse:
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
                researcher_rate=researcher_rate,
                no_telemetry=no_telemetry,
                gap_node=gap_node,
                gap_events=gap_events,
                gap_at=gap_at,
                clock_skew_ms=clock_skew,
                late_clear_ms=late_clear,
                read_delay_ms=read_delay,
                release=release,
                allocator=allocator,
                decode_reuse=decode_reuse,
                dark_aborts=dark_aborts or None,
                prefill_count=prefill_nodes,
                decode_count=decode_nodes,
                gateway_format=gateway_format,
                texts=texts or None,
                echo_rate=echo_rate,
                echo_noise=echo_noise,
                batch_lines=batch_lines,
                engine=engine,
                vllm_pd=vllm_pd or None,
                cache_salt_rate=cache_salt_rate,
                decode_prefix_caching=decode_prefix_caching or None,
                decode_log_interval=decode_log_interval,
                integrity_lines=integrity_lines,
            )
        except ValueError as err:  # an option the user can correct
            raise InputError(f"simulate: {err}") from err
        s = run(out, cfg)
        typer.echo(
            f"wrote {out}/bundle and {out}/truth: {s['requests']} requests, {s['placeholders']} placeholders, "
            f"{s['aborts']} aborts, {s['exposed_responses']} exposed responses, "
            f"{s['affected_customer_responses']} affected customer responses"
        )
    if live is not None:
        _live(out, live, speed, rotate_every, live_pages, start_delay, live_truth or out / "truth" / "live.jsonl")


def _scale(out: Path, flags: dict[str, object]) -> None:
    from forensics.errors import InputError
    from forensics.simulate.scale import generate
    from forensics.simulate.scale.options import from_cli

    try:
        opts = from_cli(flags)
        s = generate(out, opts, progress=lambda line: typer.echo(f"  {line}", err=True))
    except ValueError as err:  # an option the user can correct (from_cli, and the node names of --text-nodes)
        raise InputError(f"simulate --scale: {err}") from err
    wrote = f"{out}/bundle" + ("" if opts.no_truth else f" and {out}/truth")
    typer.echo(
        f"wrote {wrote}: {s['requests']:,} requests, {s['lines']:,} lines, {s['bytes'] / 1e6:,.1f} MB in "
        f"{s['gen_s']} s ({s['requests_per_s']:,} requests/s, {s['mb_per_s']} MB/s), {s['placeholders']:,} "
        f"placeholders, {s['aborted']:,} aborts"
    )


def _pages(out: Path, flags: dict[str, object]) -> None:
    from forensics.errors import InputError
    from forensics.simulate.pages import generate
    from forensics.simulate.pages.options import from_cli

    try:
        s = generate(out, from_cli(flags), progress=lambda line: typer.echo(f"  {line}", err=True))
    except ValueError as err:  # an option the user can correct (from_cli, and the generators' own checks)
        raise InputError(f"simulate --scale --page-events: {err}") from err
    typer.echo(
        f"wrote {out}/bundle and {out}/truth/summary.json: {s['requests']:,} requests, {s['events']:,} page events, "
        f"{s['placeholders']:,} placeholders in {s['seconds']} s"
    )


def _check_live(target: Path, speed: float, rotate_every: int | None, start_delay: float) -> None:
    from forensics.errors import InputError
    from forensics.simulate.live import check_target

    if speed < 0:
        raise InputError(f"simulate: --speed must be 0 (as fast as possible) or positive, not {speed}")
    if rotate_every is not None and rotate_every < 1:
        raise InputError(f"simulate: --rotate-every must be at least 1, not {rotate_every}")
    if start_delay < 0:
        raise InputError(f"simulate: --start-delay must not be negative, not {start_delay}")
    try:
        check_target(target)
    except ValueError as err:
        raise InputError(f"simulate: --live: {err}") from err


def _live(
    out: Path, target: Path, speed: float, rotate_every: int | None, pages: bool, start_delay: float, truth: Path
) -> None:
    """Replay OUT/bundle's engine logs into target over real time (forensics.simulate.live.replay)."""
    from forensics.errors import InputError
    from forensics.simulate.live import replay

    truth.parent.mkdir(parents=True, exist_ok=True)
    if speed > 0:
        typer.echo(f"replaying {out}/bundle into {target} at {speed:g}x", err=True)
    try:
        r = replay(out / "bundle", target, speed, start_delay, rotate_every, pages, truth=truth)
    except ValueError as err:  # not a bundle, or TARGET written meanwhile
        raise InputError(f"simulate: --live: {err}") from err
    rot = sum(cast(dict[str, int], r["rotations"]).values())
    typer.echo(
        f"replayed {r['lines']} lines into {target} in {r['elapsed_s']:.1f} s ({r['log_span_s']:.0f} s of logs, "
        f"{rot} rotations, latest line {r['max_lag_s']:.3f} s behind); {r['truth_records']} truth records in {truth}"
    )
