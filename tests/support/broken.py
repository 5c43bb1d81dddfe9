"""A corpus of broken evidence, each file with the outcome the contract (spec section 6) demands.

`add_garbage(bundle)` writes every row-level and file-level case beside the good evidence of a bundle
(the spec's example: its node names and pools) and returns the cases. Each case is one file, so its
accounting is exact: `rejected` maps every row the tool must reject to a piece of the reason
(row None: the file-level row of a cut gzip stream), `unreadable` is a piece of the manifest error
of a file that cannot be read at all, `loaded` the rows that must be kept. No case may change the
findings on the good evidence: rejected rows are never analysed, and the loaded ones describe a node
(`decode-9`) that no gateway request names.
"""

from __future__ import annotations

import gzip
import json
import random
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

TS = "2026-08-29T10:40:00Z"
GOOD_GW = {
    "ts": TS,
    "request_id": "g-x",
    "account_id": "acct-x",
    "api_token_id": "tok-x",
    "client_ip": "203.0.113.9",
    "user_agent": "curl/8",
    "model": "glm-5.3",
    "status": 200,
    "prompt_tokens": 10,
    "completion_tokens": 2,
    "duration_ms": 10.0,
    "bootstrap_room": 9_000_001,
    "prefill_node": "prefill-0",
    "decode_node": "decode-0",
}
# the first event of the example's pages/events.jsonl: re-logging it is a duplicate
EXAMPLE_FIRST_EVENT = {
    "node": "decode-0",
    "seq": 7001,
    "ts": "2026-08-29T10:40:00.001Z",
    "op": "alloc",
    "room": 1001,
    "start": 16,
    "end": 64,
}


@dataclass
class Case:
    name: str
    path: str  # relative to the bundle
    data: bytes
    rejected: dict[int | None, str] = field(default_factory=dict)
    loaded: int = 0
    unreadable: str | None = None

    @property
    def read(self) -> int:
        return self.loaded + len(self.rejected)


def _lines(rows: list[object]) -> bytes:
    out = []
    for r in rows:
        out.append(r if isinstance(r, bytes) else (r if isinstance(r, str) else json.dumps(r)).encode())
    return b"".join(x + b"\n" for x in out)


_DROP = object()


def _with(row: dict[str, object], kw: dict[str, object]) -> dict[str, object]:
    """`row` with the fields of kw set, or dropped where their value is _DROP."""
    for k, v in kw.items():
        if v is _DROP:
            row.pop(k, None)
        else:
            row[k] = v
    return row


def _gw(**kw: object) -> dict[str, object]:
    return _with(dict(GOOD_GW), kw)


def _ev(seq: object, op: str = "alloc", **kw: object) -> dict[str, object]:
    row: dict[str, object] = {
        "node": "decode-9",
        "seq": seq,
        "ts": TS,
        "op": op,
        "room": 9_000_009,
        "start": 0,
        "end": 16,
    }
    return _with(row, kw)


def _parquet(rows: list[dict[str, object]]) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows), sink)
    return sink.getvalue().to_pybytes()


def _cut_gzip(text: bytes) -> bytes:
    data = gzip.compress(text, mtime=0)
    return data[: len(data) // 2]


def _engine_garbage(rng: random.Random) -> tuple[bytes, dict[int | None, str], int]:
    """A log with binary garbage between real-looking lines; NUL lines are rejected, the rest kept as text."""
    lines: list[bytes] = [
        b"[2026-08-29 10:40:00.000 TP0] Prefill batch. #new-seq: 1, #new-token: 40, #cached-token: 0, "
        b"token usage: 0.01, #running-req: 0, #queue-req: 0"
    ]
    for _ in range(6):
        lines.append(rng.randbytes(rng.randint(1, 300)).replace(b"\n", b""))
    lines.append(b"\x00\x01\x02ELF\x00garbage")
    lines.append(
        b"[2026-13-45 99:99:99 TP0] Req Time Stats(rid=z, bootstrap_room=1, input len=1, output len=1, type=decode): x"
    )
    lines.append(
        b"[2026-08-29 10:40:00 TP0] Req Time Stats(rid=z, bootstrap_room=99999999999999999999999, "
        b"input len=1, output len=1, type=decode): x"
    )
    lines.append(b"[2026-08-29 10:40:00 TP0] KV Cache is allocated. #tokens: 123456789012345678901234567890")
    lines.append(b"[2026-08-29 10:40:00 TP0] Req Time Stats(rid=, input len=x)")
    rejected: dict[int | None, str] = {}
    loaded = 0
    for i, ln in enumerate(lines, start=1):
        if b"\x00" in ln:
            rejected[i] = "binary data"
        elif ln.startswith(b"[2026-13-45"):
            rejected[i] = "bad timestamp"
        elif b"99999999999999999999999" in ln or b"1234567890123" in ln:
            rejected[i] = "out of range"
        elif b"input len=x" in ln:
            rejected[i] = "could not be parsed"
        else:
            loaded += 1
    return b"".join(x + b"\n" for x in lines), rejected, loaded


def garbage_cases(seed: int = 8) -> list[Case]:
    rng = random.Random(seed)
    big_ua = "A" * (2 << 20)
    cases = [
        Case(
            "gateway: not JSON, arrays, empty lines",
            "gateway/zz-not-json.jsonl",
            _lines(["this is not json", "{broken", "[1, 2]", "", "null"]),
            {
                1: "not a JSON object",
                2: "not a JSON object",
                3: "not a JSON object",
                4: "empty line",
                5: "not a JSON object",
            },
        ),
        Case(
            "gateway: wrong types",
            "gateway/zz-types.jsonl",
            _lines(
                [
                    _gw(status="abc"),
                    _gw(status=200.5),
                    _gw(prompt_tokens="many"),
                    _gw(duration_ms="slow"),
                    _gw(bootstrap_room=-1),
                    _gw(bootstrap_room="x"),
                    _gw(bootstrap_room=2**64),
                    _gw(headers="not an object"),
                    _gw(completion_tokens=[1]),
                ]
            ),
            {
                1: "status",
                2: "status",
                3: "prompt_tokens",
                4: "duration_ms",
                5: "bootstrap_room",
                6: "bootstrap_room",
                7: "bootstrap_room",
                8: "headers",
                9: "completion_tokens",
            },
        ),
        Case(
            "gateway: missing required fields",
            "gateway/zz-missing.jsonl",
            _lines(
                [
                    _gw(request_id=_DROP),
                    _gw(account_id=_DROP),
                    _gw(ts=_DROP),
                    _gw(status=_DROP),
                    _gw(request_id=""),
                ]
            ),
            {
                1: "request_id missing",
                2: "account_id missing",
                3: "ts missing",
                4: "status missing",
                5: "request_id missing",
            },
        ),
        Case(
            "gateway: unparseable timestamps",
            "gateway/zz-ts.jsonl",
            _lines(
                [
                    _gw(ts="yesterday"),
                    _gw(ts="2026-08-29T10:00:00"),
                    _gw(ts="2026-13-45T99:00:00Z"),
                    _gw(ts=1756461600),
                ]
            ),
            {1: "RFC 3339", 2: "RFC 3339", 3: "RFC 3339", 4: "RFC 3339"},
        ),
        Case(
            "gateway: invalid UTF-8",
            "gateway/zz-utf8.jsonl",
            _lines([b'{"request_id": "r\xff\xfe", "account_id": "a"}', b"\xc3\x28 not utf-8 either"]),
            {1: "not valid UTF-8", 2: "not valid UTF-8"},
        ),
        Case(
            "gateway: 2 MB lines",
            "gateway/zz-huge.jsonl",
            _lines(["x" * (2 << 20), _gw(user_agent=big_ua, status="abc")]),
            {1: "not a JSON object", 2: "status"},
        ),
        Case(
            "gateway: Parquet of random bytes",
            "gateway/zz-random.parquet",
            rng.randbytes(4096),
            unreadable="cannot read",
        ),
        Case(
            "gateway: Parquet with a wrong schema",
            "gateway/zz-wrong.parquet",
            _parquet([{"when": 1, "who": "x"}]),
            unreadable="matches no known gateway format",
        ),
        Case(
            "gateway: gzip that is not gzip",
            "gateway/zz-notgz.jsonl.gz",
            b"plain text, not gzip\n",
            unreadable="gzip",
        ),
        Case(
            "pages: broken events",
            "pages/zz-bad.jsonl",
            _lines(
                [
                    _ev(1, start=40, end=20),
                    _ev(2, op="teleport"),
                    _ev(3, room=_DROP),
                    _ev(1.5),
                    _ev("abc"),
                    _ev(4, ts="yesterday"),
                    _ev(5, ts="2026-08-29T10:40:00"),
                    _ev(6, op="transfer"),
                    _ev(7, node=_DROP),
                    _ev(8, node="decode-0", start=9000, end=9016),
                    dict(EXAMPLE_FIRST_EVENT),
                    b'{"node": "decode-9\xff", "seq": 9}',
                    _ev(10, room="r1"),
                    _ev(11, start=-16, end=0),
                    _ev(12, start=16, end=16),
                    "[]",
                ]
            ),
            {
                1: "inverted",
                2: "unknown op teleport",
                3: "room missing",
                4: "seq",
                5: "seq",
                6: "ts",
                7: "ts",
                8: "transfer without peer",
                9: "node missing",
                10: "beyond the pool",
                11: "duplicate event",
                12: "not valid UTF-8",
                13: "room",
                14: "negative",
                15: "empty or inverted",
                16: "not a JSON object",
            },
        ),
        Case(
            "pages: Parquet of random bytes",
            "pages/zz-random.parquet",
            rng.randbytes(4096),
            unreadable="not a readable Parquet",
        ),
        Case(
            "pages: Parquet with a wrong schema",
            "pages/zz-wrong.parquet",
            _parquet([{"node": "decode-9", "seq": 1, "slot": 3}]),
            unreadable="wrong schema",
        ),
    ]
    # a gzip stream cut in half: the whole lines before the cut are kept; the cut is one rejected row
    events = [
        _ev(
            100 + i,
            op=("alloc", "write", "read", "free")[i % 4],
            room=9_000_100 + i // 4,
            start=16 * (i // 4),
            end=16 * (i // 4) + 16,
            **({"src": "decode"} if i % 4 == 1 else {}),
        )
        for i in range(400)
    ]
    full = _lines(events)
    cut = _cut_gzip(full)
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    got = d.decompress(cut)
    kept = got[: got.rfind(b"\n") + 1].count(b"\n")
    cases.append(Case("pages: gzip cut in half", "pages/zz-cut.jsonl.gz", cut, {None: "cut short"}, loaded=kept))
    data, rejected, loaded = _engine_garbage(rng)
    cases.append(Case("engine log: binary garbage", "engine/decode-0/zz-garbage.log", data, rejected, loaded))
    cases.append(
        Case(
            "engine requests JSONL: garbage",
            "engine/decode-0/zz-requests.jsonl",
            _lines(
                [
                    "not json",
                    b"\xff\xfe",
                    "[" * 100_000,
                    {
                        "timestamp": "2026-08-29T10:40:00",
                        "event": "request.finished",
                        "rid": "z",
                        "obj": {"bootstrap_room": 2**70},
                        "out": {"meta_info": {"prompt_tokens": 3}},
                    },
                    {
                        "timestamp": "2026-08-29T10:40:00",
                        "event": "request.finished",
                        "rid": "z",
                        "out": {"meta_info": 5},
                    },
                    {
                        "timestamp": "never",
                        "event": "request.finished",
                        "rid": "z",
                        "out": {"meta_info": {"prompt_tokens": 3}},
                    },
                    {
                        "timestamp": "2026-08-29T10:40:00",
                        "event": "request.finished",
                        "rid": "z",
                        "obj": {"bootstrap_room": True},
                        "out": {"meta_info": {"prompt_tokens": 3}},
                    },
                ]
            ),
            {
                1: "not a JSON object",
                2: "not a JSON object",
                3: "not a JSON object",
                4: "bootstrap_room",
                5: "unusable",
                6: "unusable",
                7: "bootstrap_room",
            },
        )
    )
    return cases


def add_garbage(bundle: Path, seed: int = 8) -> list[Case]:
    cases = garbage_cases(seed)
    for c in cases:
        path = bundle / c.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(c.data)
    return cases
