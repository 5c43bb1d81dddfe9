"""Ingest stage, the text a gateway log holds (prompts and responses) turned into fingerprints, never kept.

Where a gateway format carries the prompt and response (its Mapping's `prompt_text` and `response_text`
paths: LiteLLM's StandardLoggingPayload `messages`/`response`, LiteLLM_SpendLogs `messages`/`response`/
`proxy_server_request` when prompts are stored, the OTLP reader's gen_ai content, a mapping file's
fields), each record's text is read here, in Python, from the staged record (gw_values.rec, a temp
table: only the records whose text paths hold something, forensics.ingest.formats), and only its
fingerprints are stored: the text never reaches a table, a CSV or a log line.

A fingerprint: the text's words (NFKC, case-folded, `\\w+` runs), every run of SHINGLE consecutive
words hashed to 64 bits (a stable hash: BLAKE2b of each word, combined by a fixed mixer). Winnowing (in
every window of WINDOW consecutive shingles the rightmost smallest hash is kept, Schleimer et al. 2003:
texts sharing a run of SHINGLE + WINDOW - 1 words share a fingerprint) is there for long texts; WINDOW 1
keeps every shingle. Measured on simulated echoes of 12 to 24 words with a tenth of the words replaced
(benchmarks/content_eval.py): 4-word shingles, every one kept, found 0.91 to 0.98 of the echoed pairs at
the match threshold; winnowing with WINDOW 3 found 0.71 to 0.81, 5-word shingles 0.83 to 0.93.
Each fingerprint keeps its shingle's word offset in the text. Texts of fewer than SHINGLE words give
none. The hashes are not keyed: someone holding the database who guesses a text can confirm it, so the
database stays as private as the outputs (which name customers anyway).

Reads: gw_values (row, rec, may_text). Writes: content_fingerprints (file_id, row, side, pos, h).
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from functools import lru_cache
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from forensics.db import arrow_view, scalar
from forensics.gateway_formats import TEXT_FIELDS, Key, Mapping
from forensics.intake import InputFile

SHINGLE = 4  # words per shingle
WINDOW = 1  # shingles per winnowing window (1: every shingle)
SIDES = ("prompt", "response")
BATCH = 20_000  # records per fetch
WORD = re.compile(r"\w+")
# the keys of message JSON whose values hold text (OpenAI/LiteLLM messages and responses, OTel gen_ai
# messages and parts); others (role, type, id, model, usage, finish_reason, ...) are structure
TEXT_KEYS = ("content", "text", "parts", "messages", "message", "choices", "prompt", "completion", "input",
             "output", "delta", "body", "arguments")  # fmt: skip
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def words(text: str) -> list[str]:
    return WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def text_of(v: Any, depth: int = 0) -> str:
    """The text in a logged value: a string (JSON text is parsed: CSV columns and OTLP attributes hold
    messages as JSON), or the strings under TEXT_KEYS of objects and arrays, in order."""
    if depth > 20 or v is None:
        return ""
    if isinstance(v, str):
        s = v.strip()
        if s[:1] in ("{", "[") and depth < 20:
            try:
                return text_of(json.loads(s), depth + 1)
            except (ValueError, RecursionError):
                return v
        return v
    if isinstance(v, list):
        return "\n".join(t for t in (text_of(x, depth + 1) for x in v) if t)
    if isinstance(v, dict):
        return "\n".join(t for t in (text_of(v[k], depth + 1) for k in TEXT_KEYS if k in v) if t)
    return ""


@lru_cache(maxsize=1 << 20)
def _word_hash(w: str) -> int:
    return int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8, person=b"kvf-word-v1").digest(), "little")


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser over uint64 (wrapping arithmetic)."""
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


def shingles(text: str) -> np.ndarray:
    """The 64-bit hash of every run of SHINGLE words, by start offset (uint64; empty for short texts)."""
    ws = words(text)
    m = len(ws) - SHINGLE + 1
    if m < 1:
        return np.empty(0, np.uint64)
    t = np.fromiter((_word_hash(w) for w in ws), np.uint64, len(ws))
    h = _mix(t[:m])
    for j in range(1, SHINGLE):
        h = _mix(h ^ t[j : j + m])
    return h


def fingerprints(text: str) -> tuple[np.ndarray, np.ndarray]:
    """(word offsets, hashes as int64) of a text's winnowed shingles."""
    h = shingles(text)
    if not h.size:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    if h.size <= WINDOW:
        pos = np.array([h.size - 1 - int(np.argmin(h[::-1]))])
    else:
        win = np.lib.stride_tricks.sliding_window_view(h, WINDOW)
        pos = np.unique(np.arange(win.shape[0]) + WINDOW - 1 - np.argmin(win[:, ::-1], axis=1))
    return pos.astype(np.int64), h[pos].view(np.int64)


def _at(rec: Any, key: Key) -> Any:
    """The value at a path; a JSON text on the way (a CSV column, a JSON string attribute) is parsed."""
    v = rec
    for k in key:
        if isinstance(v, str) and v.strip()[:1] == "{":
            try:
                v = json.loads(v)
            except ValueError:
                return None
        if not isinstance(v, dict):
            return None
        v = v.get(k)
    return v


def side_text(rec: dict, paths: tuple[Key, ...]) -> str:
    """The text of the first path that holds some."""
    for key in paths:
        t = text_of(_at(rec, key))
        if t.strip():
            return t
    return ""


def store_fingerprints(con: duckdb.DuckDBPyConnection, f: InputFile, m: Mapping) -> None:
    """content_fingerprints of one file's staged records (gw_values), for a format with text fields."""
    if not m.carries_text:
        return
    paths = {side: m.fields.get(TEXT_FIELDS[side], ()) for side in SIDES}
    last = scalar(con, "SELECT coalesce(max(row), 0) FROM gw_values WHERE may_text")
    for lo in range(1, int(last) + 1, BATCH):  # by row ranges: the inserts go between the reads
        got = con.execute(
            "SELECT row, rec FROM gw_values WHERE may_text AND row BETWEEN ? AND ? ORDER BY row",
            [lo, lo + BATCH - 1],
        ).fetchall()
        rows, sides, pos, hs = [], [], [], []
        for row, raw in got:
            try:
                rec = json.loads(raw) if raw is not None else None
            except (ValueError, RecursionError):
                continue
            if not isinstance(rec, dict):
                continue
            for i, side in enumerate(SIDES):
                if not paths[side]:
                    continue
                p, h = fingerprints(side_text(rec, paths[side]))
                if p.size:
                    rows.append(np.full(p.size, row, np.int64))
                    sides.append(np.full(p.size, i, np.int8))
                    pos.append(p)
                    hs.append(h)
        del got
        if not rows:
            continue
        table = pa.table(
            {
                "row": np.concatenate(rows),
                "side": np.concatenate(sides),
                "pos": np.concatenate(pos).astype(np.int32),
                "h": np.concatenate(hs),
            }
        )
        with arrow_view(con, "content_batch", table):
            con.execute(
                """INSERT INTO content_fingerprints
                   SELECT ?, row, CASE side WHEN 0 THEN 'prompt' ELSE 'response' END, pos, h FROM content_batch""",
                [f.file_id],
            )
