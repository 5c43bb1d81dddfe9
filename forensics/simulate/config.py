"""Simulation settings: node layout, pool sizes, traffic rates, presets.

All times inside the simulator are integer microseconds since the Unix epoch on the TRUE clock
(the gateway's clock). A node logs on its own clock: true + clock_offset_us.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import cast

from forensics.engines import sglang_allocator
from forensics.engines.sglang import max_req_input_len
from forensics.gateway_formats import REGISTRY, TEXT_FORMATS

MS = 1_000
S = 1_000_000


@dataclass(frozen=True)
class NodeSpec:
    name: str
    role: str  # prefill | decode
    pool_tokens: int
    clock_offset_us: int
    rank_prefix: str = "TP0"  # "TP0" or "DP0 TP0"
    log_ms: bool = True  # engine log timestamps with milliseconds (SGLANG_LOG_MS)
    telemetry: bool = True  # page events written to the bundle
    pages_format: str = "parquet"  # parquet | jsonl

    def max_req_input_len(self, context_len: int) -> int:
        return max_req_input_len(context_len, self.pool_tokens)


@dataclass
class SimConfig:
    seed: int = 0
    requests: int = 2000
    page_size: int = 16
    context_len: int = 8192
    model: str = "glm-5.3"
    model_path: str = "zai-org/GLM-5.3"
    nodes: list[NodeSpec] = field(default_factory=list)
    start_us: int = 0
    duration_us: int = 0  # 0: requests / 4 per second
    prompt_median: int = 600  # customer prompt length, log-normal median (tokens)
    prompt_sigma: float = 1.0
    out_median: int = 60
    long_rate: float = 0.02  # customer prompts too long for prefill (placeholder path)
    oversize_rate: float = 0.003  # prompts >= context_len (HTTP 400)
    abort_rate: float = 0.02
    internal_rate: float = 0.08
    researcher: bool = True
    researcher_rate: float = 0.03  # share of requests that are reproduction attempts
    n_accounts: int = 60
    n_system_prompts: int = 6
    system_prompt_max: int = 1500
    prefill_us_per_token: float = 20.0
    gap_node: str | None = None
    gap_events: int = 0
    gap_at: float = 0.5  # where the dropped block starts, as a fraction of the node's events
    clock_skew_ms: int | None = None  # each node's clock offset drawn from [-skew, +skew] ms (None: fixed offsets)
    # a late landing is moved (up to 6 times) until it is this far from known events on its slots; 0: never
    late_clear_ms: int = 50
    # the SGLang release the nodes run (bundle.toml [engine] version): its allocators hand out the pages
    # (forensics.engines.sglang_allocator). 0.5.11: the newest known release that still runs an aborted
    # over-length request as a one-token placeholder (the leak this simulator reproduces; 0.5.23 retires
    # such requests before the transfer)
    release: str = "0.5.11"
    # how decode nodes reuse freed pages (forensics.simulate.cluster.PagePool): None, the release's own
    # rule (0.5.4+ in PD mode: sorted-deferred); fifo, lifo or sorted-deferred (another release's rule);
    # coalesce (no release: LIFO merged with the top of the free stack, the prefill nodes lowest-first;
    # the allocator of bundles simulated before the port)
    allocator: str | None = None
    # aborted requests may go to the decode node without page telemetry (False: only to instrumented ones)
    dark_aborts: bool = False
    read_delay_ms: float = 0.0  # decode reads a landed transfer after this to twice this (0: 0.2 to 2 ms)
    prefill_count: int = 2  # prefill nodes (prefill-0 ..)
    decode_count: int = 3  # decode nodes (decode-0 ..)
    # the gateway log's format (forensics.gateway_formats): kvf (the spec's), litellm_spendlogs,
    # litellm_payload, smg, envoy, otlp (docs/gateway-formats.md); kvf_noroom: the spec's without
    # bootstrap_room and the nodes, joined through the x-request-id the engines' request logs record
    gateway_format: str = "kvf"
    # the engine whose logs the nodes write: sglang, or vllm (vLLM 0.33.0's request lines of the same run,
    # forensics.simulate.vllm_logs)
    engine: str = "sglang"
    # prompt and response texts in the gateway log (forensics.simulate.texts; the formats that carry text:
    # litellm_payload, litellm_spendlogs, otlp); off: the bundle is the same bytes as without the option
    texts: bool = False
    vllm_pd: bool = False  # with engine vllm: vLLM's own PD path (forensics.simulate.vllm_pd), not SGLang's run
    # with vllm_pd (forensics.simulate.vllm_prefix): the share of accounts whose requests carry a cache_salt,
    # and the decode nodes' prefix cache (vLLM's default; off: the bundles of runs before the option)
    cache_salt_rate: float = 0.0
    decode_prefix_caching: bool = False
    # with texts: the probability that a true exposure pair's response echoes a span of its source's text
    echo_rate: float | None = None
    echo_noise: float = 0.0  # the probability that each word of an echoed span is replaced
    # SGLang's periodic batch lines in the engine logs (forensics.simulate.batch_lines), as this release
    # prints them ("": none, the legacy one-line prefill summary only): a decode line every
    # decode_log_interval decode steps of decode_step_ms while requests run, a prefill line per batch
    batch_lines: str = ""
    decode_log_interval: int = 40
    decode_step_ms: float = 25.0
    # the engines' integrity lines in the decode nodes' logs ("": none; "canary": SGLang's KV canary in log
    # mode, a violation line where a decode read finds another request's KV in a slot: the truth's
    # exposures); off: the bundle is the same bytes as without the option
    integrity_lines: str = ""
    preset: str = "default"
    incident_id: str = "INC-SIM-0001"
    incident_title: str = "Simulated KV-cache exposure via prefill placeholder and aborted transfers"
    discovered_at: str = ""

    def node_allocator(self, role: str) -> str:
        """The page-reuse rule of a node of this role (prefill | decode)."""
        if self.allocator == "coalesce":
            return "coalesce" if role == "decode" else "sorted"
        if role == "decode" and self.allocator is not None:
            return self.allocator
        return sglang_allocator.rule(self.release, self.page_size, role).name

    def node(self, name: str) -> NodeSpec:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    @property
    def prefill_nodes(self) -> list[NodeSpec]:
        return [n for n in self.nodes if n.role == "prefill"]

    @property
    def decode_nodes(self) -> list[NodeSpec]:
        return [n for n in self.nodes if n.role == "decode"]

    def options(self) -> dict[str, object]:
        """Plain-data description of the run (for summary.json)."""
        d = dataclasses.asdict(self)
        d["nodes"] = [dataclasses.asdict(n) for n in self.nodes]
        if not self.texts:  # a run without texts describes itself as before the option existed
            for k in ("texts", "echo_rate", "echo_noise"):
                del d[k]
        if self.engine == "sglang":  # an SGLang run describes itself as before the option existed
            del d["engine"]
        if not self.batch_lines:  # a run without them describes itself as before they existed
            for k in ("batch_lines", "decode_log_interval", "decode_step_ms"):
                del d[k]
        if not self.integrity_lines:
            del d["integrity_lines"]
        if not self.vllm_pd:
            del d["vllm_pd"]
        if not self.cache_salt_rate:
            del d["cache_salt_rate"]
        if not self.decode_prefix_caching:
            del d["decode_prefix_caching"]
        return d


def _epoch_us(iso: str) -> int:
    dt = datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone(UTC)
    return int(round(dt.timestamp() * S))


def default_nodes(
    prefill_pool: int,
    decode_pool: int,
    no_telemetry: str | None,
    prefill_count: int = 2,
    decode_count: int = 3,
    skew_ms: int | None = None,
    seed: int = 0,
) -> list[NodeSpec]:
    """prefill-0.. and decode-0..; their clock offsets fixed (the first two prefill and three decode
    nodes: +500, +1250, 0, -300, +2000 ms; more nodes: spread in steps of 170 ms) or, with skew_ms,
    drawn per node from [-skew_ms, +skew_ms] by an RNG of the seed's own (the traffic stays the same)."""
    fixed_p, fixed_d = [500, 1_250], [0, -300, 2_000]
    nodes = []
    for i in range(prefill_count):
        off = fixed_p[i] if i < len(fixed_p) else 170 * i - 400
        odd = i % 2 == 1  # every other prefill node logs like SGLang's DP attention, without ms, pages as JSONL
        nodes.append(
            NodeSpec(
                f"prefill-{i}",
                "prefill",
                prefill_pool,
                off * MS,
                rank_prefix="DP0 TP0" if odd else "TP0",
                log_ms=not odd,
                pages_format="jsonl" if odd else "parquet",
            )
        )
    for i in range(decode_count):
        off = fixed_d[i] if i < len(fixed_d) else 170 * i - 900
        rank = "DP0 TP0" if i % 2 else "TP0"
        nodes.append(NodeSpec(f"decode-{i}", "decode", decode_pool, off * MS, rank_prefix=rank))
    if skew_ms is not None:
        rng = random.Random(f"clock-skew:{seed}")
        nodes = [dataclasses.replace(n, clock_offset_us=rng.randint(-skew_ms * MS, skew_ms * MS)) for n in nodes]
    return [dataclasses.replace(n, telemetry=(n.name != no_telemetry)) for n in nodes]


ALLOCATORS = ("fifo", "lifo", "sorted-deferred", "coalesce")
LEGACY = ("coalesce", "sorted")  # PagePool rules no SGLang release runs
BATCH_RELEASES = ("0.4.9", "0.5.4", "0.5.11", "0.5.23")  # the batch-line formats forensics.simulate.batch_lines writes
# the spec's log, the spec's without rooms, and each format of forensics.gateway_formats (its writer beside it)
GATEWAY_FORMATS = ("kvf", "kvf_noroom", *REGISTRY)


def build_config(preset: str = "default", **overrides: object) -> SimConfig:
    """A preset with explicit overrides applied (None means: keep the preset's value)."""
    ov = {k: v for k, v in overrides.items() if v is not None}
    if "decode_reuse" in ov:  # the option's former name; deferred: sorted-deferred
        reuse = ov.pop("decode_reuse")
        ov.setdefault("allocator", "sorted-deferred" if reuse == "deferred" else reuse)
    prefill_pool = cast(int | None, ov.pop("prefill_pool", None))
    decode_pool = cast(int | None, ov.pop("decode_pool", None))
    no_tel = cast(str | None, ov.pop("no_telemetry", None))
    if preset == "default":
        cfg = SimConfig(preset="default", start_us=_epoch_us("2026-08-29T10:00:00Z"))
        pp, dp = 4096, 32768
        no_tel_default = None
    elif preset == "incident":
        cfg = SimConfig(
            preset="incident",
            requests=4000,
            page_size=64,
            context_len=1_048_576,
            start_us=_epoch_us("2026-08-27T00:00:00Z"),
            duration_us=_epoch_us("2026-09-09T14:00:00Z") - _epoch_us("2026-08-27T00:00:00Z"),
            prompt_median=3000,
            prompt_sigma=1.2,
            out_median=300,
            long_rate=0.044,
            oversize_rate=0.002,
            abort_rate=0.02,
            researcher_rate=0.02,
            n_accounts=180,
            system_prompt_max=6000,
            prefill_us_per_token=8.0,
            incident_id="INC-2026-0909",
            incident_title="GLM-5.3 long-prompt placeholder and aborted-transfer KV exposure",
            discovered_at="2026-09-09T14:05:00Z",
        )
        pp, dp = 681_280, 4_194_304
        no_tel_default = "decode-2"
    else:
        raise ValueError(f"unknown preset {preset!r} (expected default or incident)")
    for k, v in ov.items():
        if not hasattr(cfg, k):
            raise ValueError(f"unknown simulator option {k!r}")
        setattr(cfg, k, v)
    if not cfg.duration_us:
        cfg.duration_us = max(600 * S, cfg.requests * S // 4)
    if not cfg.discovered_at:
        end = datetime.fromtimestamp((cfg.start_us + cfg.duration_us) / S + 300, UTC)
        cfg.discovered_at = end.strftime("%Y-%m-%dT%H:%M:%SZ")
    if sglang_allocator.known_release(cfg.release) is None:
        raise ValueError(
            f"unknown SGLang release {cfg.release!r} (known: {', '.join(sglang_allocator.RELEASES)} and later)"
        )
    if cfg.allocator is not None and cfg.allocator not in ALLOCATORS:
        raise ValueError(f"unknown allocator {cfg.allocator!r} (expected one of {', '.join(ALLOCATORS)})")
    if cfg.allocator in ("fifo", "lifo") and (cfg.allocator == "fifo") != (cfg.page_size == 1):
        raise ValueError(f"SGLang runs {cfg.allocator} on page size {'1' if cfg.allocator == 'fifo' else '> 1'} only")
    if cfg.engine not in ("sglang", "vllm"):
        raise ValueError(f"engine {cfg.engine!r}: sglang or vllm")
    if cfg.vllm_pd and cfg.engine != "vllm":
        raise ValueError("--vllm-pd is vLLM's disaggregated path: it goes with --engine vllm")
    if (cfg.cache_salt_rate or cfg.decode_prefix_caching) and not cfg.vllm_pd:
        raise ValueError("--cache-salt-rate and --decode-prefix-caching go with --engine vllm --vllm-pd")
    if not 0.0 <= cfg.cache_salt_rate <= 1.0:
        raise ValueError(f"--cache-salt-rate must lie in [0, 1], not {cfg.cache_salt_rate}")
    if cfg.gateway_format not in GATEWAY_FORMATS:
        raise ValueError(
            f"unknown gateway format {cfg.gateway_format!r} (expected one of {', '.join(GATEWAY_FORMATS)})"
        )
    if cfg.echo_rate is not None:
        cfg.texts = True
        if not 0.0 <= cfg.echo_rate <= 1.0:
            raise ValueError(f"--echo-rate must lie in [0, 1], not {cfg.echo_rate}")
    if not 0.0 <= cfg.echo_noise <= 1.0:
        raise ValueError(f"--echo-noise must lie in [0, 1], not {cfg.echo_noise}")
    if cfg.texts and cfg.gateway_format not in TEXT_FORMATS:
        raise ValueError(f"--texts needs a gateway format that carries text: {', '.join(TEXT_FORMATS)}")
    if cfg.integrity_lines not in ("", "canary"):
        raise ValueError(f"unknown integrity lines {cfg.integrity_lines!r} (expected canary)")
    if cfg.batch_lines and cfg.batch_lines not in BATCH_RELEASES:
        raise ValueError(
            f"unknown SGLang release for batch lines {cfg.batch_lines!r} (expected one of {', '.join(BATCH_RELEASES)})"
        )
    if cfg.decode_log_interval < 1 or cfg.decode_step_ms <= 0:
        raise ValueError("the decode log interval must be at least 1 step and the decode step time positive")
    if cfg.prefill_count < 1 or cfg.decode_count < 1:
        raise ValueError("the simulated cluster needs at least one prefill and one decode node")
    if no_tel_default is not None and no_tel_default not in {f"decode-{i}" for i in range(cfg.decode_count)}:
        no_tel_default = None
    cfg.nodes = default_nodes(
        int(prefill_pool or pp),
        int(decode_pool or dp),
        (no_tel or None) if no_tel is not None else no_tel_default,
        cfg.prefill_count,
        cfg.decode_count,
        cfg.clock_skew_ms,
        cfg.seed,
    )
    if cfg.gap_node is not None and cfg.gap_node not in {n.name for n in cfg.nodes}:
        raise ValueError(f"--gap-node {cfg.gap_node!r} is not a node")
    return cfg
