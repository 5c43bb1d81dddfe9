"""Config audit: does each engine's KV pool hold one full-context request? Read from the startup
logs engines actually write (SGLang, vLLM, TensorRT-LLM, LMDeploy).

    audit_paths([Path("logs/prefill.log"), Path("engine/")], context_length=None) -> [ServerAudit]
    audit_engine_dirs(bundle / "engine") -> one ServerAudit per engine/<node>/ folder

Each PATH is a log file (one server) or a folder: a folder of files is one server; a folder with
subfolders gives one server per subfolder (recursively) plus one per loose file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb

from forensics.audit.model import OK, TOO_SMALL, UNKNOWN, ServerAudit
from forensics.audit.sieved import read_logs
from forensics.audit.verdict import attach_leak_windows, decide
from forensics.engines import ENGINES, KEYWORDS, detect
from forensics.engines.facts import LogLine
from forensics.errors import InputError

__all__ = ["OK", "TOO_SMALL", "UNKNOWN", "ServerAudit", "audit_engine_dirs", "audit_paths", "audit_server"]

DETECT_LINES = 5000  # logical lines per file used to recognise the engine (kept whole); past them, only
# the lines holding a word some engine's parse reads (forensics.engines.KEYWORDS) are kept
# a line holding no engine's marker and none of the words an engine's `reads` lists is left out as read
# (forensics.audit.lines.read_log): the engine detect names and, for an engine with `reads`, its facts
# are those of the whole log; for any other engine, and for the excerpt, the files are read again whole
SIEVE = tuple(
    dict.fromkeys(
        [*(m for e in ENGINES.values() for m in e.markers), *(w for e in ENGINES.values() for w in e.reads or ())]
    )
)


def _relevant(text: str) -> bool:
    for k in KEYWORDS:  # a plain loop: several times faster than any() over a generator here
        if k in text:
            return True
    return False


@dataclass(frozen=True)
class ServerInput:
    path: Path
    node: str | None
    files: tuple[Path, ...]


def discover(path: Path) -> list[ServerInput]:
    if not path.exists():
        raise InputError(f"no such log file or folder: {path}")
    if path.is_file():
        return [ServerInput(path, None, (path,))]
    if not path.is_dir():
        raise InputError(f"not a regular file or folder: {path}")
    if (path / "engine").is_dir():
        # a bundle root: its servers are engine/<node>/; gateway/, pages/ and the config files are
        # not engine logs and would only be listed as servers of unknown verdict
        servers = _node_servers(path / "engine")
        if not servers:
            raise InputError(f"{path / 'engine'}: no node folders (expected engine/<node>/*.log, as in a bundle)")
        return servers
    try:
        entries = sorted(e for e in path.iterdir() if not e.name.startswith("."))
    except OSError as err:
        raise InputError(f"cannot list folder {path}: {err.strerror or err}") from err
    files = tuple(e for e in entries if e.is_file())
    dirs = [e for e in entries if e.is_dir()]
    if not dirs:
        return [ServerInput(path, path.name, files)]
    servers = [s for d in dirs for s in discover(d)]
    servers.extend(ServerInput(f, None, (f,)) for f in files)
    return servers


def _engine_of(by_file: list[list[LogLine]]) -> str | None:
    """The engine the head of each file and every line holding a keyword name (forensics.engines.detect)."""
    return detect(ln.text for lines in by_file for ln in lines)


EXCERPT_LINES = 40  # a pasted excerpt: a file this short whose lines name no engine may be one message


def excerpt(by_file: list[list[LogLine]]) -> list[list[LogLine]]:
    """Each short file's lines joined into one logical line, pieces glued with nothing between them: an
    engine's message pasted or wrapped over several lines without its record prefix (a ticket, a chat,
    a terminal's width) reads whole again. The message patterns match any whitespace or none where the
    message has a space (forensics.engines.facts.loose), so a break at a space or inside a word joins the
    same. Only where the lines themselves name no engine (audit_server)."""
    out = []
    for lines in by_file:
        if lines and len(lines) <= EXCERPT_LINES:
            first = lines[0]
            out.append([LogLine(first.file, first.line, "".join(ln.text.strip() for ln in lines), first.rank)])
        else:
            out.append(lines)
    return out


def _detect_excerpt(by_file: list[list[LogLine]]) -> str | None:
    """The engine of the joined excerpts, the markers' spaces ignored (a break may have taken one)."""
    return detect((ln.text for lines in by_file for ln in lines), ignore_spaces=True)


def _read(
    server: ServerInput, sieve: tuple[str, ...] | None, con: duckdb.DuckDBPyConnection | None = None
) -> list[list[LogLine]]:
    return read_logs(server.files, _relevant, DETECT_LINES, sieve, con)


def audit_server(
    server: ServerInput, context_length: int | None = None, con: duckdb.DuckDBPyConnection | None = None
) -> ServerAudit:
    """The audit of one server; with `con`, DuckDB sieves its plain files (forensics.audit.sieved.read_logs)."""
    by_file = _read(server, SIEVE, con)
    path = str(server.path)
    if not server.files:
        return ServerAudit(path, "unknown", node=server.node, reason="no log files in this folder")
    engine = _engine_of(by_file)
    if engine is None or ENGINES[engine].reads is None:
        by_file = _read(server, None)
    audit = _audit_lines(server, by_file, engine, context_length)
    if audit.verdict == UNKNOWN:  # perhaps one message pasted over several lines: read it whole
        if engine is not None and ENGINES[engine].reads is not None:
            by_file = _read(server, None)  # the excerpt joins a short file's every line
        joined = excerpt(by_file)
        if joined != by_file and (engine := _detect_excerpt(joined)) is not None:
            whole = _audit_lines(server, joined, engine, context_length)
            if whole.verdict != UNKNOWN:
                return whole
    return audit


def _audit_lines(
    server: ServerInput, by_file: list[list[LogLine]], engine: str | None, context_length: int | None
) -> ServerAudit:
    path = str(server.path)
    if engine is None:
        reason = "engine not recognised (no SGLang, vLLM, TensorRT-LLM or LMDeploy startup line)"
        return ServerAudit(path, "unknown", node=server.node, reason=reason)
    entry = ENGINES[engine]
    notes: list[str] = []
    lines: list[LogLine] = []
    for f, file_lines in zip(server.files, by_file, strict=True):
        starts = [i for i, ln in enumerate(file_lines) if entry.startup.search(ln.text)]
        if len(starts) > 1:
            notes.append(
                f"{f} holds {len(starts)} server starts; only the last (line {file_lines[starts[-1]].line}) is audited"
            )
            file_lines = file_lines[starts[-1] :]
        lines.extend(file_lines)
    facts = entry.parse(lines)
    facts.notes[:0] = notes
    return decide(facts, path, server.node, context_length)


def audit_paths(paths: list[Path], context_length: int | None = None) -> list[ServerAudit]:
    """One ServerAudit per server found under `paths`, leak windows attached to SGLang PD pairs."""
    servers = [s for p in paths for s in discover(Path(p))]
    audits = [audit_server(s, context_length) for s in servers]
    attach_leak_windows(audits)
    return audits


def audit_engine_dirs(
    bundle_engine_dir: Path, context_length: int | None = None, con: duckdb.DuckDBPyConnection | None = None
) -> list[ServerAudit]:
    """One ServerAudit per `engine/<node>/` subfolder of an evidence bundle (node = folder name); `con`
    as in audit_server."""
    root = Path(bundle_engine_dir)
    if not root.is_dir():
        raise InputError(f"not an engine folder: {root}")
    audits = [audit_server(s, context_length, con) for s in _node_servers(root)]
    attach_leak_windows(audits)
    return audits


def _node_servers(engine: Path) -> list[ServerInput]:
    """One server per `engine/<node>/` folder of a bundle, with every file under it (node = folder name)."""
    try:
        nodes = sorted(d for d in engine.iterdir() if d.is_dir() and not d.name.startswith("."))
    except OSError as err:
        raise InputError(f"cannot list folder {engine}: {err.strerror or err}") from err
    return [
        ServerInput(d, d.name, tuple(sorted(f for f in d.rglob("*") if f.is_file() and not f.name.startswith("."))))
        for d in nodes
    ]
