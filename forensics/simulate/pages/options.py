"""`forensics simulate --scale --page-events uniform|realistic`: the options of the page-event generators
and the flags each takes."""

from __future__ import annotations

from dataclasses import dataclass

MODES = ("uniform", "realistic")
# the flags only --page-events takes (with --scale)
PAGES_ONLY: tuple[str, ...] = ("--page-events", "--events", "--concurrency", "--placeholder-rate")
UNIFORM: tuple[str, ...] = (
    "--seed",
    "--requests",
    "--events",
    "--decode-nodes",
    "--prefill-nodes",
    "--placeholder-rate",
)
UNIFORM += ("--page-size", "--chunk")
REALISTIC: tuple[str, ...] = UNIFORM + (
    "--concurrency",
    "--abort-rate",
    "--no-telemetry",
    "--decode-pool",
    "--prefill-pool",
)
REALISTIC += ("--context-len",)
TAKES = {"uniform": UNIFORM, "realistic": REALISTIC}


@dataclass(frozen=True)
class PageEvents:
    """None: the mode's default (uniform.py's and realistic.py's generate)."""

    mode: str
    events: int | None = None  # about this many page events written (or requests)
    requests: int | None = None  # default 100,000
    seed: int = 1
    decode_nodes: int | None = None  # uniform: 1, and as many prefill nodes; realistic: 4
    prefill_nodes: int | None = None  # realistic: 3
    page_size: int | None = None  # uniform 64, realistic 32
    placeholder_rate: float | None = None  # uniform 0.01, realistic 0.002
    chunk: int | None = None  # requests drawn at a time: uniform 400,000, realistic 65,536
    concurrency: float | None = None  # realistic: rooms in flight per decode node (300)
    abort_rate: float | None = None  # realistic: 0.02
    no_telemetry: str | None = None  # realistic: the decode node without page events (the last; '' none)
    decode_pool: int | None = None
    prefill_pool: int | None = None
    context_len: int | None = None


def from_cli(given: dict[str, object]) -> PageEvents:
    """The options from `forensics simulate --scale --page-events`'s flags (those given); ValueError names a
    wrong one."""
    mode = str(given["--page-events"])
    if mode not in MODES:
        raise ValueError(f"--page-events: {' or '.join(MODES)}, not {mode!r}")
    other = [f for f in given if f not in TAKES[mode] + ("--page-events",)]
    if other:
        raise ValueError(f"{', '.join(other)} do(es) not go with --page-events {mode}")
    if "--events" in given and "--requests" in given:
        raise ValueError("--events or --requests, not both")
    kw = {f.removeprefix("--").replace("-", "_"): v for f, v in given.items() if f != "--page-events"}
    a = PageEvents(mode=mode, **kw)  # type: ignore[arg-type]
    for name in ("events", "requests", "decode_nodes", "prefill_nodes", "page_size", "chunk"):
        v = getattr(a, name)
        if v is not None and int(v) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1")
    for name in ("placeholder_rate", "abort_rate"):
        v = getattr(a, name)
        if v is not None and not 0 <= float(v) <= 1:
            raise ValueError(f"--{name.replace('_', '-')} must be in [0, 1]")
    if a.concurrency is not None and a.concurrency <= 0:
        raise ValueError("--concurrency must be positive")
    if mode == "uniform":
        if a.prefill_nodes is not None and a.prefill_nodes != (a.decode_nodes or 1):
            raise ValueError("--page-events uniform: as many prefill nodes as decode nodes (--decode-nodes)")
        if not 1 <= (a.decode_nodes or 1) <= 100:
            raise ValueError("--page-events uniform: 1 to 100 decode nodes")
    return a
