"""`forensics watch DIR`: follow a cluster's engine logs as they are written and raise alerts
(forensics.watch): the placeholder signature, a late transfer after an abort, a pool smaller than the
context, and (with page events) exposures."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from forensics.cli.app import app
from forensics.errors import InputError

EPILOG = """Examples:

  forensics watch /var/log/cluster --alerts alerts.jsonl --state watch.state --metrics-port 9464

  forensics watch bundle/ --once          # read what is there, alert, and stop
"""


@app.command("watch", epilog=EPILOG)
def watch(
    folder: Annotated[
        Path, typer.Argument(help="Folder laid out like a bundle: engine/<node>/*.log, *.jsonl; pages/.")
    ],
    alerts: Annotated[
        Path | None, typer.Option("--alerts", help="Append alerts (JSON lines) here; default stdout.")
    ] = None,
    state: Annotated[
        Path | None, typer.Option("--state", help="State file: offsets and open rooms survive a restart.")
    ] = None,
    metrics_port: Annotated[
        int | None, typer.Option("--metrics-port", min=1, max=65535, help="Serve Prometheus /metrics on 127.0.0.1.")
    ] = None,
    webhook: Annotated[str | None, typer.Option("--webhook", help="POST each alert as JSON to this URL.")] = None,
    interval: Annotated[float, typer.Option("--interval", min=0.01, help="Seconds between polls.")] = 0.2,
    once: Annotated[bool, typer.Option("--once", help="Read what is written now, then stop.")] = False,
    idle_exit: Annotated[
        float | None, typer.Option("--idle-exit", min=0.1, help="Stop after this many seconds without a new line.")
    ] = None,
    no_pages: Annotated[bool, typer.Option("--no-pages", help="Do not follow pages/*.jsonl.")] = False,
    gateway: Annotated[
        Path | None,
        typer.Option(
            "--gateway",
            help="Gateway log in the spec's JSONL format: alerts name the request id and account of the "
            "record that names their room (bootstrap_room).",
        ),
    ] = None,
) -> None:
    """Follow engine logs as they are written and alert on KV leaks while they happen."""
    from forensics.watch import Metrics, run, serve_metrics

    if not folder.is_dir():
        raise InputError(f"{folder}: not a folder (expected engine/<node>/*.log laid out like a bundle)")
    if once and not (folder / "engine").is_dir():
        # nothing to read: "0 lines read" would pass for a clean cluster
        raise InputError(
            f"{folder}: no engine/ folder, nothing to watch (expected engine/<node>/*.log, as in a bundle)"
        )
    if gateway is not None and not gateway.is_file():
        raise InputError(f"--gateway {gateway}: no such file (expected a gateway log in the spec's JSONL format)")
    if webhook is not None and not webhook.startswith(("http://", "https://")):
        raise InputError(f"--webhook {webhook!r}: not an http(s) URL")
    metrics = Metrics()
    server = None
    if metrics_port is not None:
        try:
            server = serve_metrics(metrics, metrics_port)
        except OSError as err:
            raise InputError(f"--metrics-port {metrics_port}: {err.strerror or err}") from None
    w = run(
        folder, interval=interval, once=once, idle_exit=idle_exit, alerts=alerts, state=state, webhook=webhook,
        metrics=metrics, pages=not no_pages, gateway=gateway,
    )  # fmt: skip
    if server is not None:
        server.shutdown()
    print(f"watch: {w.lines} lines read, {w.count} alerts, {len(w.detector.rooms)} rooms open", file=sys.stderr)
