"""SGLang's log lines (0.4.x to 0.5.23), as its loggers write them.

Sources (sgl-project/sglang, python/sglang/srt/):
- record prefix `[YYYY-MM-DD HH:MM:SS(.ffffff)? TP0 ...] `: utils.configure_logger;
- `server_args=ServerArgs(...)`: entrypoints/engine (the startup dump of ServerArgs);
- `KV Cache is allocated. #tokens: N` (`<name> is allocated. dtype: ...` in 0.5.23, `VA upper bound`
  for virtual pools): mem_cache/memory_pool;
- `max_total_num_tokens=N, ..., context_len=C`: managers/scheduler (after the pool is sized);
- `full_layer_tokens=F, swa_layer_tokens=S`: model_executor/model_runner (sliding-window models);
- `Input length (L tokens) exceeds the maximum allowed length (M tokens)`: managers/scheduler, the
  over-length path that replaces the prompt with a placeholder (see ../shared/notes/sglang-facts.md);
- `Req Time Stats(rid=..., bootstrap_room=..., input len=..., output len=..., type=...)`:
  managers/scheduler_metrics (per finished request);
- `Decode transfer failed for request rank=... rid=... bootstrap_room=...`: disaggregation/decode.
"""

from __future__ import annotations

import re

# --- the record prefix and the per-request lines (ingest) ---
PREFIX = re.compile(
    r"^\[(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?P<ms>\.\d{1,6})?(?P<rank>(?: [A-Z_]+\d+)*)\] (?P<msg>.*)$"
)
OVERLENGTH = re.compile(
    r"Input length \((?P<L>\d+) tokens\) exceeds the maximum allowed length \((?P<M>\d+) tokens\)"
    r".*?self\.rid=(?:'(?P<rid>[^']*)'|\"(?P<rid2>[^\"]*)\")"
)
TIME_STATS = re.compile(
    r"Req Time Stats\(rid=(?P<rid>[^,]+?)(?:, bootstrap_room=(?P<room>-?\d+|None))?, input len=(?P<inp>\d+), "
    r"output len=(?P<out>\d+), type=(?P<type>\w+)\)"
)
# in the durations after a Req Time Stats line: how long the request ran forward (decode: its decode steps)
FORWARD_DURATION = re.compile(r"(?<![\w.])forward_duration=(?P<s>\d+(?:\.\d+)?)")
# ... and when it entered the scheduler (Unix seconds, the node's clock): nothing of it is in the
# node's KV pool before then
START_TIME = re.compile(r"(?<![\w.])start_time=(?P<s>\d+(?:\.\d+)?)")
XFER_FAILED = re.compile(
    r"(?P<side>Decode|Prefill) (?P<stage>transfer|bootstrap|handshake) failed for request rank=\d+ "
    r"\S*rid=(?:'(?P<rid>[^']*)'|\"(?P<rid2>[^\"]*)\") \S*bootstrap_room=(?P<room>\d+)"
    r"(?: with exception \w+\(bootstrap_room=\d+\): (?P<reason>.*))?"
)

# --- startup and scheduler lines: the node's config (ingest) and the pool audit ---
SERVER_ARGS = re.compile(r"server_args=ServerArgs\((?P<body>.*)\)?\s*$")
SERVER_ARG = re.compile(r"(?P<key>\w+)=(?P<val>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^,()]+)")
POOL = re.compile(
    r"(?P<name>[\w\- ]{0,60}?)\s*(?P<what>is allocated|VA upper bound)\.\s*(?:dtype:\s*[^,]*,\s*)?"
    r"#tokens:\s*(?P<n>\d[\d,]*)"
)
SWA_POOLS = re.compile(r"full_layer_tokens=(\d[\d,]*),\s*swa_layer_tokens=(\d[\d,]*)")
MAX_TOTAL = re.compile(r"max_total_num_tokens=(\d[\d,]*)")
CONTEXT_LEN = re.compile(r"(?<![\w.])context_len=(\d[\d,]*)")
ARG_CONTEXT = re.compile(r"(?<![\w.])'?context_length'?\s*[=:]\s*(None|\d+)")
ARG_PAGE = re.compile(r"(?<![\w.])'?page_size'?\s*[=:]\s*(None|\d+)")
ARG_MODE = re.compile(r"(?<![\w.])'?disaggregation_mode'?\s*[=:]\s*'?(\w+)")
ARG_MODEL = re.compile(r"(?<![\w.])'?model_path'?\s*[=:]\s*'([^']*)'")
OVER_LIMIT = re.compile(r"Input length \((\d+) tokens\) exceeds the maximum allowed length \((\d+) tokens\)")
TRUNCATED = re.compile(r"longer than the KV cache pool size.*?max_req_input_len=(\d+)")
POOL_WARNING = re.compile(r"KV pool holds (\d[\d,]*) tokens, fewer than --context-length (\d[\d,]*)")
TOKENIZER_CONTEXT = re.compile(
    r"longer than the model's context length \((\d+) tokens\)|maximum context length of (\d+) tokens"
)
DECODE_ROLE = re.compile(r"for decode server")
PREFILL_ROLE = re.compile(r"for prefill server|prefill disaggregation mode warmup")


BINDING_PRIORITY = 2  # a pool that holds requests' KV (pool_kind): the one whose size binds


def pool_kind(name: str) -> tuple[str, int]:
    """What a pool line's name says it holds, and its priority as the binding pool (lower binds first):
    sliding-window and state pools never bind (9), a draft model's binds only alone (6), else 2."""
    low = name.lower()
    if "swa" in low or "sliding" in low:
        return "swa", 9
    if any(k in low for k in ("mamba", "ssm", "state", "conv")):
        return "state", 9
    if any(k in low for k in ("draft", "eagle", "mtp", "nextn", "spec")):
        return "draft", 6
    return ("full" if "full" in low else "kv"), BINDING_PRIORITY
