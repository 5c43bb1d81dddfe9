"""vLLM's per-request line shapes: the one table (SHAPES) where a request line vLLM writes is described,
each with its pattern on the message, its literal (the start of every message it matches), its row
builder (forensics.engines.vllm.fields) and its renderer (the line as the release writes it: the
simulator's and the tests' writer). The per-line reader (forensics.engines.vllm.reader) is derived from
it. Where each line comes from, per release: docs/vllm-lines.md.

The record: vLLM's logging format (vllm/logger.py `_FORMAT`, `_DATE_FORMAT`): an optional
VLLM_LOGGING_PREFIX, from 0.11 the process `(APIServer pid=N) ` (a child's lines relayed by its parent
carry both processes' prefixes), then `LEVEL MM-DD HH:MM:SS [file.py:N] message`; V0 releases wrote
`LEVEL MM-DD HH:MM:SS file.py:N] message`. The time has no year and no fraction of a second, and is
the server's local time. With ColoredFormatter (a terminal, or VLLM_LOGGING_COLOR=1) ANSI codes wrap
the prefix's parts. With a JSON logging config (0.2x: vllm/logging_utils/formatter.py JSON_FORMAT,
python-json-logger) a record is a JSON object whose `asctime` is `YYYY-MM-DD HH:MM:SS,mmm`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from forensics.engines.facts import EngineRows
from forensics.engines.sglang.rows import Row
from forensics.engines.vllm import fields

ANSI = re.compile(r"\x1b\[[0-9;]*m")
# the record: anything before (a logging prefix, process prefixes, a collector's pod name), the level,
# month-day and time, the source `[file:line]` (V0: `file:line]`), the message
PREFIX = re.compile(
    r"(?:^|(?<=[\s)]))(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<md>\d{2}-\d{2}) (?P<hms>\d{2}:\d{2}:\d{2})"
    r" \[?(?P<src>[^\s\]]+:\d+)\] (?P<msg>.*)$"
)
# a JSON record's asctime (logging's default: no datefmt in the JSON formatter's config)
ASCTIME = re.compile(r"(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}),(?P<ms>\d{3})$")

Builder = Callable[[re.Match[str], Row, EngineRows], str]


@dataclass(frozen=True)
class Shape:
    """One kind of request line vLLM writes: `pattern` on the message (anchored at its start, which
    `literal` is), `build` its rows, `render` the message as `release` writes it (render's keywords are
    the line's fields)."""

    pattern: re.Pattern[str]
    literal: str
    build: Builder
    render: Callable[..., str]


# --- renderers: the messages as the two releases read for them format them (docs/vllm-lines.md):
# 0.10.2 (vllm/entrypoints/logger.py) and 0.33.0 (vllm/entrypoints/serve/utils/request_logger.py), with
# each release's SamplingParams.__repr__ (vllm/sampling_params.py) ---
RELEASES = ("0.10.2", "0.33.0")


def _new(release: str) -> bool:
    if release not in RELEASES:
        raise ValueError(f"vLLM {release}: the renderers write {' and '.join(RELEASES)} only")
    return release == "0.33.0"


def sampling_repr(release: str, max_tokens: int, extra_args: dict[str, Any] | None, temperature: float = 1.0) -> str:
    """SamplingParams.__repr__ of `release` with the defaults the OpenAI server leaves."""
    new = _new(release)
    parts = [
        "n=1", "presence_penalty=0.0", "frequency_penalty=0.0", "repetition_penalty=1.0",
        f"temperature={temperature}", *(["watermarking=None"] if new else []), "top_p=1.0", "top_k=0", "min_p=0.0",
        "seed=None", "stop=[]", "stop_token_ids=[]", "bad_words=[]",
        *(["thinking_token_budget=None"] if new else []), "include_stop_str_in_output=False", "ignore_eos=False",
        f"max_tokens={max_tokens}", "min_tokens=0", "logprobs=None", "prompt_logprobs=None",
        "skip_special_tokens=True", "spaces_between_special_tokens=True",
        *([] if new else ["truncate_prompt_tokens=None"]),
        "structured_outputs=None" if new else "guided_decoding=None", f"extra_args={extra_args!r}",
    ]  # fmt: skip
    return f"SamplingParams({', '.join(parts)})"


def render_received(
    release: str, rid: str, prompt: str, token_ids: list[int], max_tokens: int, kv: dict[str, Any] | None
) -> str:
    params = sampling_repr(release, max_tokens, None if kv is None else {"kv_transfer_params": kv})
    if _new(release):  # from 0.12 the prompt and its token ids are DEBUG's (`Request .. details`)
        return f"Received request {rid}: params: {params}, lora_request: None."
    return (
        f"Received request {rid}: prompt: {prompt!r}, params: {params}, prompt_token_ids: {token_ids}, "
        "prompt_embeds shape: None, lora_request: None."
    )


def render_generated(
    release: str, rid: str, output: str, token_ids: list[int] | None, finish_reason: str | None, stream: str = ""
) -> str:
    """`stream`: '', 'delta' or 'complete'."""
    info = f" (streaming {stream})" if stream else ""
    if _new(release):  # the token ids are DEBUG's (`Generated response .. details`)
        return f"Generated response {rid}{info}: output: {output!r}, finish_reason: {finish_reason}"
    return (
        f"Generated response {rid}{info}: output: {output!r}, output_token_ids: {token_ids}, "
        f"finish_reason: {finish_reason}"
    )


def render_added(rid: str) -> str:
    return f"Added request {rid}."


def render_aborted(rids: list[str]) -> str:
    return f"Aborted request(s) {','.join(rids)}."


def render_record(md_hms: str, source: str, message: str, level: str = "INFO", pid: int = 1) -> str:
    """A record as the default formatter writes it in the API server's process, without colours
    (`md_hms`: `MM-DD HH:MM:SS`; the process prefix: 0.10.2 vllm/utils decorate_logs, 0.33.0 _FORMAT)."""
    return f"(APIServer pid={pid}) {level} {md_hms} [{source}] {message}"


# --- the table, in the order the reader tries the shapes ---
SHAPES: dict[str, Shape] = {
    # --enable-log-requests: one per request (per prompt of a batch completion), when the API server takes it
    "received": Shape(
        re.compile(r"Received request (?P<rid>.+?): (?P<body>(?:prompt|params): .*)$"),
        "Received request ",
        fields.received,
        render_received,
    ),
    # --enable-log-outputs: a whole response, a stream's delta, a stream's end
    "generated": Shape(
        re.compile(
            r"Generated response (?P<rid>.+?)(?: \((?P<stream>streaming delta|streaming complete)\))?:"
            r" output: (?P<body>.*)$"
        ),
        "Generated response ",
        fields.generated,
        render_generated,
    ),
    # --enable-log-requests: the engine's id of the request as the engine core is handed it
    "added": Shape(re.compile(r"Added request (?P<rid>\S+)\.$"), "Added request ", fields.added, render_added),
    # requests the API server aborted (a client gone, a failure), their engine ids joined by ','
    "aborted": Shape(
        re.compile(r"Aborted request\(s\) (?P<rids>[^,\s]+(?:,[^,\s]+)*)\.$"),
        "Aborted request(s) ",
        fields.aborted,
        render_aborted,
    ),
}
# the substrings a line this reader reads holds (the audit's sieve and the watcher's candidates)
READ_MARKERS = tuple(s.literal for s in SHAPES.values())
