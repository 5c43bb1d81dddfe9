"""What a scale bundle is made of: the generator's options (`forensics simulate --scale`) and its
fixed shape (the window's start, the streams' routes)."""

from __future__ import annotations

from dataclasses import dataclass

from forensics.simulate.config import BATCH_RELEASES, MS, S

DAY = 86_400 * S
START = "2026-08-26T00:00:00Z"
TICK_US = 40 * 25 * MS  # decode_log_interval (40) steps of decode_step_ms (25)
NO_PREFIX_RELEASES = ("0.5.11", "0.5.23")  # --log-requests text lines through a "%(message)s" formatter
ROUTES = ("litellm", "envoy")
ROTATIONS = ("dateext", "numbered", "numbered-gz", "none")


@dataclass(frozen=True)
class Scale:
    requests: int = 100_000
    days: int = 14
    decode_nodes: int = 16
    prefill_nodes: int = 8
    seed: int = 1
    release: str = "0.5.11"  # the SGLang release the lines are of (batch lines, --log-requests prefix)
    gateway: tuple[str, ...] = ROUTES  # litellm, envoy or both, sorted
    litellm_share: float = 0.7  # with both: the accounts behind LiteLLM
    text_nodes: str = "odd-decode"  # --log-requests text form: odd-decode, all, none, or node names
    rotation: str = "dateext"
    accounts: int = 3000
    long_rate: float = 0.001  # prompts log-uniform in [64K, 1M] tokens
    oversize_rate: float = 0.0005  # prompts over the context (HTTP 400)
    abort_rate: float = 0.01
    spikes_per_day: float = 3.0
    no_write: bool = False  # render every line, write none (the CPU's rate)
    chunk: int = 250_000  # requests per time slice (memory)
    no_truth: bool = False  # no OUT/truth (summary.json is written all the same)


# --gateway-format's names of the two gateways a scale bundle writes
GATEWAY_FORMATS = {"litellm_spendlogs": "litellm", "envoy": "envoy"}


# the flags only --scale takes, and those of the simulator's (the pool, the pages, the live replay) it refuses
SCALE_ONLY: tuple[str, ...] = ("--days", "--rotation", "--text-nodes", "--accounts", "--litellm-share")
SCALE_ONLY += ("--oversize-rate", "--spikes-per-day", "--chunk", "--no-write", "--no-truth")
SHARED = ("--seed", "--requests", "--prefill-nodes", "--decode-nodes", "--abort-rate", "--long-rate", "--release")
# the simulate command's parameters checked against --scale (--preset apart: its default is a name)
FLAGS = tuple(f.removeprefix("--").replace("-", "_") for f in SCALE_ONLY + SHARED) + (
    "gateway_format",
    *("page_size", "context_len", "prefill_pool", "decode_pool", "researcher_rate", "no_telemetry", "gap_node"),
    *("clock_skew", "late_clear", "read_delay", "allocator", "decode_reuse", "dark_aborts", "texts", "echo_rate"),
    *("echo_noise", "batch_lines", "decode_log_interval", "live", "vllm_pd"),
)


def from_cli(given: dict[str, object]) -> Scale:
    """The options from `forensics simulate --scale`'s flags (those given); ValueError names a wrong one."""
    other = [f for f in given if f not in SCALE_ONLY + SHARED + ("--gateway-format",)]
    if other:
        raise ValueError(f"{', '.join(other)} do(es) not go with --scale (no pool, no page events, no live replay)")
    kw: dict[str, object] = {}
    for flag, v in given.items():
        if flag == "--gateway-format":
            parts = sorted({p.strip() for p in str(v).split(",") if p.strip()})
            if not parts or any(p not in GATEWAY_FORMATS for p in parts):
                raise ValueError(f"--gateway-format: {', '.join(GATEWAY_FORMATS)} or both, comma-separated; not {v!r}")
            kw["gateway"] = tuple(sorted(GATEWAY_FORMATS[p] for p in parts))
        else:
            kw[flag.removeprefix("--").replace("-", "_")] = v
    a = Scale(**kw)  # type: ignore[arg-type]
    if a.release not in BATCH_RELEASES:
        raise ValueError(f"--release: one of {', '.join(BATCH_RELEASES)}, not {a.release!r}")
    if a.rotation not in ROTATIONS:
        raise ValueError(f"--rotation: one of {', '.join(ROTATIONS)}, not {a.rotation!r}")
    for name in ("requests", "days", "decode_nodes", "prefill_nodes", "accounts", "chunk"):
        if int(getattr(a, name)) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1")
    for name in ("long_rate", "oversize_rate", "abort_rate", "litellm_share"):
        if not 0 <= float(getattr(a, name)) <= 1:
            raise ValueError(f"--{name.replace('_', '-')} must be in [0, 1]")
    if a.days > 40:  # the renderer's sort keys hold 43 bits of microseconds from a day before the start
        raise ValueError("--days: at most 40")
    return a
