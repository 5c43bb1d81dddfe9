"""What the GPU check runs: the model folder, the servers' and the router's commands and environments,
and the seeded request mix. Pure functions of the settings (no process, no network): --dry-run prints
them and tests/scripts/test_gpu_check.py checks them without a GPU.

Each flag below is one SGLang 0.5.11 and 0.5.23 both accept (0.5.11: python/sglang/srt/server_args.py
ServerArgs.add_cli_args; 0.5.23: the same parser, its fields in python/sglang/srt/arg_groups/fields/);
`gpu_check.py --check-args` parses the commands with the installed release's own parser.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

PREFILL, DECODE = "prefill-0", "decode-0"
GUARD_REFUSAL = "kv-forensics KV integrity guard refused"  # forensics/sglang/guard.py: the refusal's text
KINDS = ("normal", "overlength", "abort_early", "abort_stream")

# A randomly initialised Llama (--load-format dummy): no weights to download, no tokenizer (the server
# runs with --skip-tokenizer-init and takes input_ids), a KV cache like any Llama's. Two layers and two KV
# heads keep both servers' weights and pools in a few hundred MB of one GPU.
MODEL_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "vocab_size": 32000,
    "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "bos_token_id": 1,
    "eos_token_id": 2,
}


@dataclass
class Settings:
    run: Path
    python: str = sys.executable
    gpu: str = "0"
    host: str = "127.0.0.1"
    port_base: int = 31000
    page_size: int = 16
    guard: str = "observe"
    transfer: str = "auto"  # auto, mooncake or fake; resolved by gpu_check.resolve_transfer
    mooncake_protocol: str = ""  # MOONCAKE_PROTOCOL for 0.5.23 (tcp where no RDMA device is found)
    lb: str = "client"  # client: this script posts to both servers as mini_lb does; router: sglang_router
    context_length: int = 4096
    prefill_tokens: int = 2048  # prefill's --max-total-tokens: prompts past it take the placeholder path
    decode_tokens: int = 16384  # decode's --max-total-tokens: small, so pages are reused within the run
    mem_fraction: float = 0.25
    cuda_graph: bool = False
    requests: int = 80
    concurrency: int = 8
    seed: int = 1
    max_new_tokens: int = 24
    extra_server_args: list[str] = field(default_factory=list)

    @property
    def ports(self) -> dict[str, int]:
        b = self.port_base
        return {
            "router": b,
            "prefill": b + 100,
            "decode": b + 200,
            "prefill_nccl": b + 300,
            "decode_nccl": b + 400,
            "bootstrap": b + 500,
        }

    def url(self, name: str) -> str:
        return f"http://{self.host}:{self.ports[name]}"

    @property
    def max_input(self) -> int:
        """Prefill's largest accepted prompt: min(context_len - 1, pool - 1) - 5 (0.5.23
        managers/tp_worker.py; 0.5.11 alike); validate_input_length refuses len >= this."""
        return min(self.context_length - 1, self.prefill_tokens - 1) - 5


def model_dir(s: Settings) -> Path:
    return s.run / "model"


def write_model(s: Settings) -> Path:
    d = model_dir(s)
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(MODEL_CONFIG, indent=1) + "\n")
    return d


def kvf_dir(s: Settings, node: str) -> Path:
    return s.run / "kvf" / node


def log_path(s: Settings, name: str) -> Path:
    return s.run / "logs" / f"{name}.log"


def server_cmd(s: Settings, role: str, backend: str) -> list[str]:
    ports = s.ports
    cmd = [
        s.python,
        "-m",
        "sglang.launch_server",
        "--model-path",
        str(model_dir(s)),
        "--load-format",
        "dummy",
        "--skip-tokenizer-init",
        "--host",
        s.host,
        "--port",
        str(ports[role]),
        "--tp-size",
        "1",
        "--base-gpu-id",
        "0",
        "--nccl-port",
        str(ports[f"{role}_nccl"]),
        "--disaggregation-mode",
        role,
        "--disaggregation-transfer-backend",
        backend,
        "--disaggregation-bootstrap-port",
        str(ports["bootstrap"]),
        "--page-size",
        str(s.page_size),
        "--context-length",
        str(s.context_length),
        "--max-total-tokens",
        str(s.prefill_tokens if role == "prefill" else s.decode_tokens),
        "--mem-fraction-static",
        str(s.mem_fraction),
        # the lines investigate reads: Receive/Finish (rid, room) and Req Time Stats (input len per room)
        "--log-requests",
        "--enable-request-time-stats-logging",
    ]
    if not s.cuda_graph:
        cmd.append("--disable-cuda-graph")
    return cmd + list(s.extra_server_args)


def server_env(s: Settings, role: str, backend: str) -> dict[str, str]:
    """Only what the check adds to the operator's environment."""
    node = PREFILL if role == "prefill" else DECODE
    env = {
        "CUDA_VISIBLE_DEVICES": s.gpu,
        "TZ": "UTC",  # the logs carry no zone: bundle.toml says UTC
        "SGLANG_LOG_MS": "1",  # milliseconds in the log prefix (python/sglang/srt/utils/common.py)
        "KVF_SGLANG_DIR": str(kvf_dir(s, node)),  # forensics/sglang/config.py
        "KVF_SGLANG_NODE": node,
        "KVF_SGLANG_GUARD": s.guard,
        "KVF_SGLANG_FORMAT": "jsonl",  # appended as it goes: what a stop cuts off is the last flush at most
        # a transfer row names its receiver by Mooncake's endpoint:port, a port picked at start; the pair
        # has one decode node, so every endpoint is it
        "KVF_SGLANG_PEERS": f"*={DECODE}",
    }
    if backend == "mooncake" and s.mooncake_protocol:
        env["MOONCAKE_PROTOCOL"] = s.mooncake_protocol  # 0.5.23 environ.py; 0.5.11 always uses rdma
    return env


def router_cmd(s: Settings) -> list[str]:
    """Both releases' own PD tests start it so (python/sglang/test/server_fixtures/disaggregation_fixture.py
    launch_lb): sglang_router's MiniLoadBalancer (sgl-router/py_src/sglang_router/mini_lb.py), which
    posts each request to both servers with a random bootstrap_room. Neither wheel ships
    sglang.srt.disaggregation.mini_lb; the router is the separate package sglang-router."""
    return [
        s.python,
        "-m",
        "sglang_router.launch_router",
        "--pd-disaggregation",
        "--mini-lb",
        "--prefill",
        s.url("prefill"),
        str(s.ports["bootstrap"]),
        "--decode",
        s.url("decode"),
        "--host",
        s.host,
        "--port",
        str(s.ports["router"]),
    ]


@dataclass
class Planned:
    request_id: str
    account_id: str
    kind: str
    prompt_tokens: int
    room: int
    abort_after: float  # abort_early: seconds after sending; abort_stream: chunks read before closing
    input_ids: list[int]


def plan_requests(s: Settings) -> list[Planned]:
    """The seeded mix: 60% normal prompts, 15% over prefill's limit (yet within the context length,
    which the tokenizer manager checks first), 25% aborted by the client (closing the connection), half
    before the first token (while prefill or the transfer runs), half after a few streamed chunks."""
    rng = random.Random(s.seed)
    over_lo = s.max_input + 1
    over_hi = min(s.context_length - s.max_new_tokens - 8, s.decode_tokens // 4)
    if over_hi <= over_lo:
        raise ValueError(
            f"no over-length prompt fits: prefill accepts up to {s.max_input} tokens, the context length "
            f"{s.context_length} and decode's pool {s.decode_tokens} leave nothing above it"
        )
    out = []
    for i in range(s.requests):
        r = rng.random()
        kind = "normal" if r < 0.60 else "overlength" if r < 0.75 else "abort_early" if r < 0.875 else "abort_stream"
        n = rng.randint(over_lo, over_hi) if kind == "overlength" else rng.randint(16, min(600, s.max_input - 1))
        after = rng.uniform(0.0, 0.08) if kind == "abort_early" else float(rng.randint(1, 4))
        out.append(
            Planned(
                request_id=f"gpu-{s.seed}-{i:04d}",
                account_id=f"acct-{rng.randint(0, 5):02d}",
                kind=kind,
                prompt_tokens=n,
                room=rng.randint(1, 2**63 - 1),
                abort_after=round(after, 4),
                input_ids=[rng.randint(10, MODEL_CONFIG["vocab_size"] - 1) for _ in range(n)],  # type: ignore[operator]
            )
        )
    return out


def plan_json(s: Settings, backend: str, reqs: list[Planned]) -> str:
    d = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(s).items()}
    d["transfer_resolved"] = backend
    d["requests_planned"] = [{k: v for k, v in asdict(p).items() if k != "input_ids"} for p in reqs]
    return json.dumps(d, indent=1) + "\n"
