"""Ingest stage, the engine of each node: ingest picks its readers by the engine a node's logs name.

A bundle's engine logs are SGLang's (docs/evidence-bundle.md), and SGLang's readers
(forensics.ingest.bulk, forensics.ingest.engine) read them. A node whose logs name another engine of
the registry (forensics.engines.ENGINES: vLLM, TensorRT-LLM, LMDeploy) and never SGLang is read by
that engine's start-up parser instead: its node_config row holds the pool, context length, role and
page size the config audit reads from the same lines (forensics.audit). An engine with a line reader
of its own (vLLM's request lines: forensics.engines.vllm) has its plain logs read through it too
(read_requests: engine_requests, engine_request_links); each file of the others says that its
per-request lines are not read. No other engine logs a request's KV transfer the way SGLang does: the
findings that rest on SGLang's lines do not cover those nodes' requests, and the files' notes and the
report's technical annex (T1) say so.

Recognition reads the head of each log file (DETECT_BYTES; of a shipper's export, its first
DETECT_SHIPPED lines): banners and start-up lines come first. A node goes to another engine's reader
only when its heads name that engine and hold no SGLang marker at all, so an SGLang log that quotes
another engine (a traceback through vLLM's kernels) is never taken for it.

The config audit (forensics.audit: pool size against context length, with the lines that prove it) is
run here once over the bundle's engine/<node>/ folders, every file under them as the standalone audit
reads them (DuckDB sieving the plain files on ingest's connection: forensics.audit.sieved.read_logs), and its
verdicts are stored (store_audit) for the report's root cause.

Reads: engine/<node>/ files. Writes: node_config rows of the nodes of other engines, node_audit.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from pathlib import Path

import duckdb

from forensics.audit import ServerInput, audit_engine_dirs, audit_server
from forensics.audit.sieved import drop_kept
from forensics.engines import ENGINES, marker_scores, winner
from forensics.engines.facts import EngineRows, LineReader
from forensics.engines.sglang_startup import NAME as SGLANG
from forensics.ingest import rawtext
from forensics.ingest.engine import parse_log
from forensics.intake import BundleConfig, InputFile, shippers

DETECT_BYTES = 1 << 20
COMPRESSED_UNREAD = (".zst",)  # read by DuckDB only: recognised as SGLang's (the bundle's engine)


DETECT_SHIPPED = 5000  # lines of a log shipper's export


def _head(f: InputFile) -> list[str]:
    if f.format:  # a log shipper's export: the engine's lines inside it (forensics.intake.shippers)
        return [
            s.raw.decode("utf-8", errors="replace") for s in islice(shippers.unwrap(f.path, f.format), DETECT_SHIPPED)
        ]
    data = bytearray()
    for chunk in rawtext.readable_chunks(f, 1 << 16):
        data += chunk
        if len(data) >= DETECT_BYTES:
            break
    return bytes(data[:DETECT_BYTES]).decode("utf-8", errors="replace").splitlines()


def _line_count(f: InputFile) -> int:
    n, last = 0, b"\n"
    for chunk in rawtext.readable_chunks(f):
        n, last = n + chunk.count(b"\n"), chunk[-1:]
    return n + (last != b"\n")


# SGLang's markers as bytes: all ASCII, so a marker is in a head's decoded lines exactly when its bytes
# are in the head's bytes (the decoder replaces no ASCII byte, and no marker holds a line break)
_SGLANG_BYTES = tuple(m.encode("ascii") for m in ENGINES[SGLANG].markers)
_LONGEST = max(len(m) for m in _SGLANG_BYTES)


def _names_sglang(f: InputFile) -> bool:
    """The head of a plain engine log (DETECT_BYTES) holds an SGLang marker: read chunk by chunk, and
    no further than the first marker (in SGLang's logs, the first start-up lines)."""
    data = bytearray()
    for chunk in rawtext.readable_chunks(f, 1 << 16):
        start = max(0, len(data) - _LONGEST + 1)
        data += chunk[: DETECT_BYTES - len(data)]
        if any(data.find(m, start) >= 0 for m in _SGLANG_BYTES):
            return True
        if len(data) >= DETECT_BYTES:
            break
    return False


def node_engines(files: list[InputFile]) -> dict[str, str]:
    """The engine of each node with plain engine logs: SGLang unless its files' heads name another
    engine of the registry and no SGLang marker (the module's docstring). A node is SGLang's as soon as
    one head holds an SGLang marker (the first file's start-up lines, as a rule): the heads of its other
    files are then not read, and the other engines' markers not counted, as they decide nothing."""
    logs: dict[str, list[InputFile]] = {}
    for f in files:
        if f.source != "engine_log" or f.node is None or f.error or f.skipped:
            continue
        logs.setdefault(f.node, []).append(f)
    out = {}
    for node, group in logs.items():
        read = [f for f in group if not f.rel.lower().endswith(COMPRESSED_UNREAD)]
        if any(not f.format and _names_sglang(f) for f in read):
            out[node] = SGLANG
            continue
        scores = marker_scores(line for f in read for line in _head(f))
        out[node] = (winner(scores) if scores[SGLANG] == 0 else None) or SGLANG
    return out


def reader_of(engine: str) -> Callable[[int | None], LineReader] | None:
    """The line reader of an engine of the registry given a year (Engine.dated; an engine whose times
    carry their year ignores it); None when it has none."""
    entry = ENGINES[engine]
    requests = entry.requests
    if requests is None:
        return None
    return entry.dated if entry.dated is not None else (lambda _year: requests)


def read_requests(engine: str, files: list[InputFile], config: BundleConfig, rows: EngineRows) -> bool:
    """A node of another engine that has a line reader (forensics.engines.facts.Engine.requests: vLLM's):
    its plain logs through it, into `rows`, each file's lines counted; False when the engine has none
    (its files are then counted by load_startup). The year of a log whose times print none is the
    bundle's [engine] log_year (Engine.dated)."""
    entry, dated = ENGINES[engine], reader_of(engine)
    if dated is None:
        return False
    reader = dated(config.log_year)
    for f in files:
        if f.format:  # a log shipper's export: read by forensics.ingest.shipped, each line's year its own
            continue
        parse_log(f, config.log_timezone, rows, reader.text)
        if entry.dated is not None and config.log_year is None:
            f.notes.append(
                f"a {entry.label} log prints no year in its times: bundle.toml sets no [engine] log_year, "
                "so the times of its request lines are unknown"
            )
    return True


def load_startup(
    con: duckdb.DuckDBPyConnection, node: str, engine: str, files: list[InputFile], *, requests_read: bool = False
) -> None:
    """A node of another engine: its start-up facts into node_config; its files, unless read by the
    engine's line reader (read_requests), accounted as read and noted as read for their start-up facts
    only."""
    entry = ENGINES[engine]
    audit = audit_server(ServerInput(files[0].path.parent, node, tuple(f.path for f in files)))
    first = files[0]
    con.execute(
        """INSERT INTO node_config (node, role, page_size, context_len, pool_tokens, model_path, file_id, line,
                                    engine)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        [node, audit.role, audit.page_size, audit.context_len, audit.pool_tokens, audit.model, first.file_id, 1,
         engine],
    )  # fmt: skip
    pool = f"pool {audit.pool_tokens} tokens" if audit.pool_tokens is not None else "pool not stated"
    ctx = f"context length {audit.context_len}" if audit.context_len is not None else "context length not stated"
    read_note = (
        f"a {entry.label} log (recognised by its lines): its start-up facts ({pool}, {ctx}) and its "
        "request lines are read (engine_requests, engine_request_links); the findings that rest on SGLang's "
        f"lines (rooms, transfer timings) do not cover node {node}'s requests"
    )
    note = (
        f"a {entry.label} log (recognised by its lines): only its start-up facts are read ({pool}, {ctx}); "
        f"KV Forensics reads per-request lines of SGLang{' and ' + entry.label if entry.requests else ''} only: "
        f"the findings for node {node}'s requests rest on its page events and the gateway log alone"
    )
    for f in files:
        if requests_read:
            f.notes.append(read_note)
        else:
            f.rows_read = f.rows_loaded = _line_count(f)
            f.notes.append(note)


def store_audit(con: duckdb.DuckDBPyConnection, bundle: Path) -> None:
    """node_audit: the config audit's verdict, reason, input limit and evidence lines (cited as
    bundle-relative file:line: text) per node of engine/. An audit that fails is stored as its error,
    not raised: the report then rests on node_config and says so."""
    root = bundle.absolute()
    if not (root / "engine").is_dir():
        return
    try:
        audits = audit_engine_dirs(root / "engine", con=con)
    except Exception as err:  # the report stands on node_config without it, and says so
        con.execute("INSERT INTO node_audit (reason) VALUES (?)", [f"{type(err).__name__}: {err}"])
        return
    finally:
        drop_kept(con)  # the lines the bulk reader kept for the audit (forensics.ingest.bulk)

    def rel(file: str) -> str:  # bundle-relative: the report must not depend on where the bundle lies
        return Path(file).relative_to(root).as_posix() if Path(file).is_relative_to(root) else Path(file).name

    rows = [
        (a.node, a.verdict, a.reason, a.max_req_input_len, [f"{rel(e.file)}:{e.line}: {e.text}" for e in a.evidence])
        for a in audits
        if a.node
    ]
    if rows:  # DuckDB refuses an empty executemany: no audit named a node
        con.executemany("INSERT INTO node_audit VALUES (?, ?, ?, ?, ?)", rows)
