"""The differential test of SGLang's three readers, all derived from one table of line shapes
(forensics.engines.sglang.shapes SHAPES): ingest's bulk reader (forensics.ingest.bulk), the per-line
reader (forensics.engines.sglang.reader, the reference) and the watcher's chunk reader
(forensics.watch.chunks) give the same rows, on every log under tests/data and on a fuzzed corpus: lines
built from the shapes with random fields, cut short, with junk between.

bulk against per-line: engine_lines, engine_requests, batch_stats, node_config and rejected as ingest
stores them, and each file's row accounting (KVF_ENGINE_READER=python is the per-line path). chunk
against per-line: each line holding a watched literal, the rows it gives (the fields the detector reads:
chunks.ROW_KEYS) and its time resolution."""

from __future__ import annotations

import gzip
import json
import string
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings

from forensics import db
from forensics.engines.facts import EngineRows
from forensics.engines.sglang.reader import parse_request_line, parse_text_line
from forensics.engines.sglang.shapes import SHAPES
from forensics.ingest import bulk
from forensics.ingest.engine import store
from forensics.intake import InputFile
from forensics.watch import chunks
from forensics.watch.detector import JSON_LITERALS, TEXT_LITERALS

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
UTC = ZoneInfo("UTC")
TABLES = ("engine_lines", "engine_requests", "batch_stats", "node_config", "rejected")


@contextmanager
def _reader(name: str) -> Iterator[None]:
    before = bulk.READER
    bulk.READER = name
    try:
        yield
    finally:
        bulk.READER = before


def _ingest(paths: list[tuple[Path, str]], reader: str) -> dict[str, list[tuple[Any, ...]]]:
    """The engine tables ingest stores from `paths` ((path, source)), read by `reader`."""
    con = db.connect(":memory:")
    db.run_query(con, "ingest", "schema")
    files = [
        InputFile(i + 1, source, path, f"engine/n{i % 3}/{path.name}", f"n{i % 3}", bytes=path.stat().st_size)
        for i, (path, source) in enumerate(paths)
    ]
    rows = EngineRows()
    with _reader(reader):
        bulk.load_engine_files(con, files, UTC, rows)
    store(con, rows)
    out = {
        t: con.execute(f"SELECT * FROM {t}" + (" ORDER BY node" if t == "node_config" else "")).fetchall()
        for t in TABLES
    }
    out["files"] = [(f.file_id, f.rows_read, f.rows_loaded, f.rows_rejected, f.error) for f in files]
    con.close()
    return out


def assert_bulk_is_per_line(paths: list[tuple[Path, str]]) -> dict[str, list[tuple[Any, ...]]]:
    ref, got = _ingest(paths, "python"), _ingest(paths, "bulk")
    for t in ref:
        assert len(got[t]) == len(ref[t]), t
        for a, b in zip(ref[t], got[t], strict=True):
            assert a == b, (t, a, b)
    return got


def _project(rows: list[dict[str, Any]], keys: tuple[str, ...]) -> list[tuple[Any, ...]]:
    return [tuple(r.get(k) for k in keys) for r in rows]


CONFIG_KEYS = ("rank", "role", "page_size", "context_len", "full_layer_tokens", "max_total_num_tokens",
               "allocated_tokens", "tp_size", "model_path")  # fmt: skip


def assert_chunk_is_per_line(data: bytes, jsonl: bool) -> int:
    """The chunk reader's lines and rows against the per-line reader's, line by line; the lines compared."""
    data = data[: data.rfind(b"\n") + 1]  # the chunk reader takes whole lines
    literals = JSON_LITERALS if jsonl else TEXT_LITERALS
    expect: dict[int, tuple[Any, ...]] = {}
    for lineno, raw in enumerate(data.splitlines(keepends=True), start=1):
        if not any(lit in raw for lit in literals):
            continue
        rows = EngineRows()
        if not (parse_request_line if jsonl else parse_text_line)(raw, "", 0, lineno, UTC, rows):
            continue
        if rows.requests or rows.config:
            res = rows.lines[0]["ts_resolution_ms"] if rows.lines else None
            expect[lineno] = (_project(rows.requests, chunks.ROW_KEYS), _project(rows.config, CONFIG_KEYS), res)
    got = {
        line: (_project(reqs, chunks.ROW_KEYS), _project(cfg, CONFIG_KEYS), res)
        for line, _, reqs, cfg, res in chunks.typed(data, 0, jsonl, UTC, literals)
    }
    assert got == expect
    return len(got)


# --- every log under tests/data, and the sample bundle's engine logs ---
def _real_logs() -> list[tuple[Path, str]]:
    logs = sorted(p for p in DATA.rglob("*") if p.is_file() and p.suffix in (".log", ".txt", ".jsonl", ".gz"))
    logs += sorted((ROOT / "sample_data" / "bundle" / "engine").rglob("*.*"))
    return [(p, "engine_requests" if p.suffix == ".jsonl" else "engine_log") for p in logs]


def test_every_log_under_tests_data_and_the_sample() -> None:
    paths = _real_logs()
    assert len(paths) > 40
    got = assert_bulk_is_per_line(paths)
    kinds = {r[6] for r in got["engine_lines"]}
    # not vacuous: the shapes every request writes and the start-up lines are on these logs
    assert {"time_stats", "received", "finished", "prefill_batch", "decode_batch", "server_args"} <= kinds
    compared = 0
    for path, source in paths:
        data = path.read_bytes()
        if path.suffix == ".gz":
            continue  # the watcher follows plain files
        compared += assert_chunk_is_per_line(data, source == "engine_requests")
    assert compared > 1000


# --- the fuzzed corpus: lines built from the shapes ---
INT64 = 1 << 63
NUMS = st.one_of(
    st.integers(0, 10_000),
    st.integers(-5, INT64 + 5).filter(lambda n: abs(n) > INT64 - 3),
    st.integers(-(10**30), 10**30),
)
RID_CHARS = string.ascii_letters + string.digits + "-_.'\",()=: {}[]\\#é\x00\t"
RIDS = st.one_of(st.text(string.ascii_lowercase + string.digits + "-", min_size=1, max_size=12),
                 st.text(RID_CHARS, max_size=12))  # fmt: skip
FLOATS = st.one_of(
    st.floats(0, 1e4, allow_nan=False).map(lambda x: f"{x:.2f}"), st.sampled_from(["nan", "inf", "1e-05", "-1.5", ""])
)


@st.composite
def _prefix(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["none", "plain", "ms", "bad"]))
    if kind == "none":
        return ""
    day = draw(st.sampled_from(["2026-08-29", "2026-02-30", "0000-01-01", "2026-13-01"]))
    ms = "." + draw(st.text("0123456789", min_size=1, max_size=6)) if kind in ("ms", "bad") else ""
    rank = draw(st.sampled_from(["", " TP0", " DP1 TP3", " tp0"]))
    return f"[{day} 10:{draw(st.integers(0, 61)):02d}:07{ms}{rank}] "


@st.composite
def _time_stats(draw: st.DrawFn) -> str:
    names = ["forward_duration", "queue_duration", "prealloc_duration", "bootstrap_duration", "transfer_duration",
             "alloc_wait_duration", "bootstrap_queue_duration", "prealloc_queue_duration", "start_time", "entry_time",
             "start"]  # fmt: skip
    durs = draw(st.lists(st.tuples(st.sampled_from(names), FLOATS, st.sampled_from(["ms", "", "s"])), max_size=5))
    sep = draw(st.sampled_from([": ", ", "]))
    tail = sep + ", ".join(f"{n}={v}{u}" if draw(st.booleans()) else f"{n}({v}{u})" for n, v, u in durs) if durs else ""
    room = draw(st.one_of(st.none(), NUMS.map(str), st.just("None")))
    room_s = "" if room is None else f", bootstrap_room={room}"
    kind = draw(st.sampled_from(["prefill", "decode", "unified", "x-y"]))
    if draw(st.booleans()):
        head = f"Req Time Stats(rid={draw(RIDS)}{room_s}, input len={draw(NUMS)}, output len={draw(NUMS)}, type={kind})"
    else:
        head = (f"ReqTimeStats(rid={draw(RIDS)}{room_s}, input_len={draw(NUMS)}, cached_input_len={draw(NUMS)}, "
                f"output_len={draw(NUMS)}, attempts=1, type={kind})")  # fmt: skip
    return head + tail


@st.composite
def _batch(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["Decode", "Prefill"]))
    names = (["#running-req", "#token", "token usage", "pre-allocated usage", "#prealloc-req", "#transfer-req",
              "#retracted-req", "cuda graph", "gen throughput (token/s)", "#queue-req"] if kind == "Decode" else
             ["#new-seq", "#new-token", "#cached-token", "#token", "token usage", "#running-req", "#queue-req",
              "#prealloc-req", "#inflight-req", "input throughput (token/s)", "#pending-token"])  # fmt: skip
    chosen = draw(st.lists(st.sampled_from(names), min_size=1, max_size=len(names) + 1))
    vals = [
        draw(st.sampled_from(["True", "False", "yes"])) if n.endswith("graph") else str(draw(st.one_of(NUMS, FLOATS)))
        for n in chosen
    ]
    it = draw(st.sampled_from(["", " [12]", " [x]"]))
    end = draw(st.sampled_from(["", ", ", " "]))
    return (
        f"{kind} batch{it}{draw(st.sampled_from([',', '.']))} "
        + ", ".join(f"{n}: {v}" for n, v in zip(chosen, vals, strict=True))
        + end
    )


def _pyval(draw: st.DrawFn) -> str:
    return draw(st.one_of(RIDS.map(repr), NUMS.map(str), st.sampled_from(["None", "True", "[1, 2, 3]", "[1, '...']"])))


@st.composite
def _request_log(draw: st.DrawFn) -> str:
    rid = draw(st.one_of(RIDS.map(repr), st.sampled_from(["None", "['a', 'b']", "7"])))
    room = draw(st.one_of(NUMS.map(str), st.sampled_from(["None", "[1, 2]"])))
    fields = [f"rid={rid}", f"bootstrap_room={room}", f"text={_pyval(draw)}", f"input_ids={_pyval(draw)}"]
    obj = ", ".join(draw(st.permutations(fields))[: draw(st.integers(1, 4))])
    if draw(st.booleans()):
        return f"Receive: obj=GenerateReqInput({obj})"
    reason = draw(st.sampled_from(["None", "{'type': 'stop'}", "{'type': 'length', 'length': 16}", "'abort'",
                                   "{'type': 'abort', 'message': 'x, y'}"]))  # fmt: skip
    meta = {"id": _pyval(draw), "finish_reason": reason, "prompt_tokens": draw(NUMS.map(str)),
            "completion_tokens": _pyval(draw), "e2e_latency": "nan"}  # fmt: skip
    keys = draw(st.permutations(list(meta)))[: draw(st.integers(1, 5))]
    body = ", ".join(f"'{k}': {meta[k]}" for k in keys)
    return f"Finish: obj=GenerateReqInput({obj}), out={{'meta_info': {{{body}}}}}"


@st.composite
def _other(draw: st.DrawFn) -> str:
    n, m, rid = draw(NUMS), draw(NUMS), draw(RIDS)
    return draw(st.sampled_from([
        f"Input length ({n} tokens) exceeds the maximum allowed length ({m} tokens). self.rid='{rid}'",
        f"Decode transfer failed for request rank=0 decode_req.req.rid='{rid}' decode_req.req.bootstrap_room={n} "
        f"with exception KVTransferError(bootstrap_room={n}): "
        f"Request {n} timed out after 30.0s in KVPoll.WaitingForInput",
        f"Request {n} timed out after {m}s in KVPoll.Bootstrapping",
        f"Context corruption detected: Request {rid} (bootstrap_room={n}) received metadata from bootstrap_room={m}. "
        f"Metadata buffer index: 3.",
        f"KV checksum mismatch req={rid} bootstrap_room={n} expected=0x1f got=0x2e",
        f"KV Cache is allocated. #tokens: {n}, K size: 1.00 GB",
        f"max_total_num_tokens={n}, chunked_prefill_size=8192, max_prefill_tokens=16384, context_len={m}",
        f"server_args=ServerArgs(model_path='m', page_size={n}, context_length={m}, disaggregation_mode='decode')",
        "Lost connection with prefill instance (bootstrap_addr: 10.0.0.1:8998), 3 requests affected",
        "Load weight begin. avail mem=70.00 GB",
    ]))  # fmt: skip


SHAPED = st.one_of(_time_stats(), _batch(), _request_log(), _other())
JUNK = st.one_of(
    st.text(st.characters(blacklist_characters="\n\r\x1e\ufeff"), max_size=40),
    st.sampled_from(
        ["Req Time Stats(", "Decode batch, #", "Receive: obj=", "[2026-08-29 10:00:00] ", "\x00", "Finish: obj=X("]
    ),
)


@st.composite
def _text_line(draw: st.DrawFn) -> str:
    if draw(st.integers(0, 5)) == 0:
        return draw(JUNK)
    msg = draw(SHAPED)
    if draw(st.integers(0, 4)) == 0:  # cut short
        msg = msg[: draw(st.integers(0, len(msg)))]
    return draw(_prefix()) + msg


TIMESTAMPS = [
    "2026-08-29T10:00:07.123456",
    "2026-08-29T10:00:07",
    "2026-08-29T10:00:07+02:00",
    "2026-02-30T00:00:00",
    "x",
]


@st.composite
def _json_line(draw: st.DrawFn) -> str:
    if draw(st.integers(0, 5)) == 0:
        return draw(JUNK)
    event = draw(st.sampled_from(["request.received", "request.finished", "request.other"]))
    scalars = st.one_of(st.none(), RIDS, NUMS, st.booleans())
    rec: dict[str, Any] = {
        "timestamp": draw(st.sampled_from(TIMESTAMPS)),
        "event": event,
        "rid": draw(scalars),
        "obj": {
            "bootstrap_room": draw(scalars),
            "input_ids": draw(st.lists(st.one_of(NUMS, st.just("...")), max_size=4)),
        },
    }  # fmt: skip
    if event == "request.finished":
        reasons = st.one_of(scalars, st.dictionaries(st.sampled_from(["type", "length", 'k"']), scalars))
        meta = {"id": draw(scalars), "prompt_tokens": draw(scalars), "completion_tokens": draw(scalars),
                "finish_reason": draw(reasons)}  # fmt: skip
        rec["out"] = {"meta_info": meta}
    if draw(st.booleans()):
        rec["headers"] = {draw(st.sampled_from(["x-request-id", "X-Request-Id", "x-correlation-id"])): draw(scalars)}
    text = json.dumps(rec, ensure_ascii=draw(st.booleans()))
    return text[: draw(st.integers(0, len(text)))] if draw(st.integers(0, 6)) == 0 else text


def _corpus(draw: st.DrawFn, line: st.SearchStrategy[str]) -> bytes:
    lines = draw(st.lists(line, min_size=1, max_size=20))
    data = "\n".join(lines).encode("utf-8", errors="surrogatepass")
    return data + (b"\n" if draw(st.booleans()) else b"")


FUZZ = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


@FUZZ
@given(data=st.data())
def test_fuzzed_text_logs(tmp_path_factory: Any, data: st.DataObject) -> None:
    corpus = _corpus(data.draw, _text_line())
    folder = tmp_path_factory.mktemp("fuzz")
    plain = folder / "server.log"
    plain.write_bytes(corpus)
    paths = [(plain, "engine_log")]
    if data.draw(st.booleans()):
        packed = folder / "server.log.1.gz"
        packed.write_bytes(gzip.compress(corpus))
        paths.append((packed, "engine_log"))
    assert_bulk_is_per_line(paths)
    assert_chunk_is_per_line(corpus, jsonl=False)


@FUZZ
@given(data=st.data())
def test_fuzzed_request_logs(tmp_path_factory: Any, data: st.DataObject) -> None:
    corpus = _corpus(data.draw, _json_line())
    path = tmp_path_factory.mktemp("fuzz") / "requests.jsonl"
    path.write_bytes(corpus)
    assert_bulk_is_per_line([(path, "engine_requests")])
    assert_chunk_is_per_line(corpus, jsonl=True)


def test_the_fuzzed_lines_reach_the_bulk_shapes() -> None:
    """Not vacuous: the generators write lines each bulk pattern takes."""
    import re

    from hypothesis import find

    for name, gen in (("time_stats", _time_stats()), ("batch", _batch()), ("received", _request_log()),
                      ("finished", _request_log())):  # fmt: skip
        pattern = re.compile(SHAPES[name].bulk or "")
        find(gen, lambda msg, p=pattern: bool(p.match(msg)), settings=settings(max_examples=2000, database=None))


# --- vLLM's request lines: the per-line reader (forensics.engines.vllm.reader, its only ingest reader) and
# the watcher's chunk path (forensics.watch.engines picks the reader, chunks.per_line types the chunk) ---
def test_vllm_chunks_are_its_per_line_reader() -> None:
    from forensics.engines.vllm.reader import dated
    from forensics.watch.engines import NodeEngines

    logs = sorted((DATA / "vllm_lines").glob("*.log"))
    banner = (DATA / "audit" / "vllm_v1_hybrid_ok.log").read_bytes()  # names the node's engine
    compared = 0
    for path in logs:
        data = banner + path.read_bytes()
        other = NodeEngines(2026).of("n", data)
        assert other is not None and other.engine == "vllm"
        expect = {}
        for lineno, raw in enumerate(data.splitlines(keepends=True), start=1):
            rows = EngineRows()
            if dated(2026).text(raw, "", 0, lineno, UTC, rows) and rows.requests:
                expect[lineno] = _project(rows.requests, chunks.ROW_KEYS)
        for cut in (len(data), len(banner) + 1):  # the whole log, and in two chunks
            head = data[: data.rfind(b"\n", 0, cut) + 1]
            got = {
                line: _project(reqs, chunks.ROW_KEYS)
                for part, before in ((head, 0), (data[len(head) :], head.count(b"\n")))
                for line, _, reqs, _, _ in chunks.per_line(part, before, other.markers, False, UTC, other.read)
            }
            assert got == expect, path.name
        compared += len(expect)
    assert compared >= 10


def test_a_finish_reason_key_with_a_quote(tmp_path: Path) -> None:
    """A finish reason's key holding a quote, alone in its file (hypothesis found it: the bulk query put
    the key into a JSON path and failed): the per-line reader's rows."""
    path = tmp_path / "requests.jsonl"
    path.write_text(
        '{"timestamp": "2026-08-29T10:00:07.123456", "event": "request.finished", "rid": "0", "obj": '
        '{"bootstrap_room": "0", "input_ids": []}, "out": {"meta_info": {"id": "0", "prompt_tokens": null, '
        '"completion_tokens": "u8a0zrbm9lq", "finish_reason": {"type": null, "k\\"": null}}}}\n'
    )
    assert_bulk_is_per_line([(path, "engine_requests")])
