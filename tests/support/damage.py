"""A seeded generator of damage to evidence, each kind as real log shippers and exporters fail.

`apply(kind, bundle, seed)` damages a COPY of a simulated bundle in place (the caller copies) and
returns a `Damage`: which input it damaged and the truth of the damage (records lost, the byte offset of
a cut, the node and time range of an outage, the seqs of a gap). The same kind, bundle and seed give the
same bytes. Each kind, and where it comes from:

- `gzip_cut`: a gateway export delivered as gzip (CloudWatch Logs' CreateExportTask writes gzip objects
  to S3; Fluent Bit's and Vector's S3 outputs compress with gzip) cut at a random byte offset, as a
  partial download or an interrupted upload leaves it (a file without its footer: paleolimbot/duckdb-
  nanoarrow#105 "what a partial download or an interrupted write leaves behind").
- `gzip_cut_engine`: the same cut in a node's rotated, compressed engine log (logrotate's `compress`:
  server.log.gz).
- `column_dropped`: a gateway export whose request-id or account column is dropped or renamed: LiteLLM's
  SpendLogs schema changes between releases (BerriAI/litellm#10797 adds columns; #6633: `request_id`
  left empty for streamed requests), and a pipeline's rename (Logstash `mutate { rename }`, Vector
  `remap`) changes a field's name under the exporter.
- `outage`: every line of one decode node's engine log in a time range removed. Fluent Bit drops a chunk
  whose retries are exhausted (fluent/fluent-bit#2412, #309: "Task cannot be retried"); CloudWatch Logs
  subscriptions drop throttled deliverables after 24 hours (docs.aws.amazon.com, SubscriptionFilters).
- `page_file_cut`: a page-events Parquet file cut short, its footer lost, as a disk filling or a
  writer killed leaves it (apache/parquet-java#3069 "Write truncated parquet footer";
  openobserve/openobserve#6099 "Parquet footer corrupt after node OOMKilled").
- `seq_gap`: a block of consecutive page events lost (the same dropped chunk, on the page files'
  shipper): the node's seq jumps.
- `duplicated`: a block of lines delivered twice (at-least-once: Fluent Bit retries a whole chunk after
  a partial success, fluent/fluent-bit#6369, aws/aws-for-fluent-bit#150; Vector's delivery guarantee
  is at-least-once, vector.dev/docs/architecture/guarantees; Logstash's persistent queue "at-least-once
  delivery", elastic.co/guide/en/logstash/current/persistent-queues.html).
- `reordered`: blocks of lines out of order (CloudWatch CreateExportTask: "Time-based sorting on chunks
  of log data inside an exported file is not guaranteed", API_CreateExportTask).
- `gateway_file_missing`: one file of a gateway export never delivered (a CloudWatch export task per
  time range that failed, an S3 object lost). A format logged in one file is first split into four
  time-ordered parts, as per-period exports are.

Duplicates and reordering lose nothing: the findings must be byte-identical to the undamaged bundle's
(`Damage.invariant`). A missing file's name is unknown to the tool (`Damage.named` False): what must
name it is a row of the gateway's source in evidence_damage.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import random
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq


@dataclass(frozen=True)
class Damage:
    kind: str
    input: str  # the damaged input's path relative to the bundle (an outage: the node's folder)
    source: str  # gateway | engine | pages
    detail: str
    records_lost: int | None = None  # records the damage removed (None: none removed)
    node: str | None = None
    offset: int | None = None  # where a stream was cut (bytes)
    span: tuple[str, str] | None = None  # an outage's first and last lost time (the log's own times)
    seqs: tuple[int, int] | None = None  # a seq gap's first and last lost seq
    duplicated: int = 0  # lines delivered twice
    invariant: bool = False  # the findings must equal the undamaged bundle's
    named: bool = True  # the tool can know the input's name


# ---------------------------------------------------------------- files


def _read(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if path.name.endswith(".gz") else data


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(gzip.compress(data, mtime=0) if path.name.endswith(".gz") else data)


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def _rel(bundle: Path, path: Path) -> str:
    return path.relative_to(bundle).as_posix()


def _files(bundle: Path, folder: str, *suffixes: str) -> list[Path]:
    """The files under bundle/folder whose names end in one of `suffixes` (every file: none given)."""
    found = (p for p in (bundle / folder).rglob("*") if p.is_file())
    return sorted(p for p in found if not suffixes or p.name.endswith(suffixes))


def _has_header(path: Path) -> bool:
    return ".csv" in path.name


def _count_records(data: bytes, header: bool) -> int:
    return sum(1 for ln in _lines(data) if ln.strip()) - (1 if header else 0)


# ---------------------------------------------------------------- kinds


def _cut_gzip(bundle: Path, path: Path, rng: random.Random, kind: str, source: str, node: str | None) -> Damage:
    plain = _read(path)
    if not path.name.endswith(".gz"):  # delivered compressed: the exporter's .gz object
        path.unlink()
        path = path.with_name(path.name + ".gz")
    packed = gzip.compress(plain, mtime=0)
    offset = int(len(packed) * rng.uniform(0.3, 0.7))
    path.write_bytes(packed[:offset])
    got = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(packed[:offset])
    whole = got[: got.rfind(b"\n") + 1]
    header = _has_header(path)
    lost = _count_records(plain, header) - _count_records(whole, header and bool(whole))
    return Damage(kind, _rel(bundle, path), source, f"gzip stream cut at byte {offset} of {len(packed)}",
                  records_lost=lost, node=node, offset=offset)  # fmt: skip


def gzip_cut(bundle: Path, rng: random.Random) -> Damage:
    path = rng.choice([p for p in _files(bundle, "gateway") if not p.name.endswith(".parquet")])
    return _cut_gzip(bundle, path, rng, "gzip_cut", "gateway", None)


def gzip_cut_engine(bundle: Path, rng: random.Random) -> Damage:
    node = rng.choice(_decode_nodes(bundle))
    return _cut_gzip(bundle, bundle / "engine" / node / "server.log", rng, "gzip_cut_engine", "engine", node)


# the request-id and account fields of each gateway format, and what a rename makes of them: kvf,
# LiteLLM's SpendLogs (team_id) and payload (id, metadata.user_api_key_team_id), Envoy (headers), SMG
# (its span's request_id), OTLP (span attributes)
_FIELDS = {"request_id": "requestId", "account_id": "accountId", "team_id": "teamId", "id": "call_id",
           "user_api_key_team_id": "user_api_key_teamId",
           "x-request-id": "x_request_id", "x-tenant-id": "x_tenant_id", "tenant.id": "tenant_id",
           "http.request.header.x-request-id": "http.request.header.x_request_id"}  # fmt: skip


def _rename(value: object, field: str, new: str | None, top: bool = True) -> object:
    """A JSON record with `field` renamed to `new` (dropped when None) wherever it is a key, or the key of
    an OTLP attribute ({"key": field, "value": ...}); "id" only at the top (payloads nest other ids)."""
    if isinstance(value, list):
        out = []
        for v in value:
            if isinstance(v, dict) and v.get("key") == field and "value" in v:
                if new is None:
                    continue
                v = {**v, "key": new}
            out.append(_rename(v, field, new, False))
        return out
    if isinstance(value, dict):
        res = {}
        for k, v in value.items():
            if k == field and (top or field != "id"):
                if new is not None:
                    res[new] = v
                continue
            res[k] = _rename(v, field, new, False)
        return res
    return value


def _keys(value: object, top: bool = True) -> set[str]:
    if isinstance(value, list):
        return {k for v in value for k in _keys(v, False)} | {
            v["key"] for v in value if isinstance(v, dict) and isinstance(v.get("key"), str)
        }
    if isinstance(value, dict):
        return {k for k in value if top or k != "id"} | {k for v in value.values() for k in _keys(v, False)}
    return set()


def column_dropped(bundle: Path, rng: random.Random) -> Damage:
    candidates = []
    for path in _files(bundle, "gateway"):
        fields = sorted(f for f in _FIELDS if f in _field_names(path))
        if fields:
            candidates.append((path, fields))
    path, fields = rng.choice(candidates)
    field = rng.choice(fields)
    new = _FIELDS[field] if rng.random() < 0.5 else None
    if path.name.endswith(".parquet"):
        t = pq.read_table(path)
        t = t.rename_columns([new if c == field else c for c in t.column_names]) if new else t.drop([field])
        pq.write_table(t, path)
        n = t.num_rows
    elif ".csv" in path.name:
        rows = list(csv.reader(io.StringIO(_read(path).decode())))
        i = rows[0].index(field)
        rows = [r[:i] + ([new] if new and k == 0 else [r[i]] if new else []) + r[i + 1 :] for k, r in enumerate(rows)]
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(rows)
        _write(path, buf.getvalue().encode())
        n = len(rows) - 1
    else:
        out, n = [], 0
        for ln in _lines(_read(path)):
            rec = json.loads(ln)
            n += field in _keys(rec)
            out.append(json.dumps(_rename(rec, field, new), separators=(",", ":")).encode() + b"\n")
        _write(path, b"".join(out))
    what = f"renamed to {new}" if new else "dropped"
    return Damage("column_dropped", _rel(bundle, path), "gateway", f"field {field} {what} in {n} records",
                  records_lost=n)  # fmt: skip


def _field_names(path: Path) -> set[str]:
    if path.name.endswith(".parquet"):
        return set(pq.read_schema(path).names)
    lines = _lines(_read(path))
    if ".csv" in path.name:
        return set(next(csv.reader([lines[0].decode()])))
    names: set[str] = set()
    for ln in lines[:50]:
        try:
            names |= _keys(json.loads(ln))
        except ValueError:
            continue
    return names


_LOG_TS = re.compile(rb"^\[(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d(?:\.\d+)?)")
_JSON_TS = re.compile(rb'"timestamp": ?"(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d(?:\.\d+)?)')


def _ts(line: bytes) -> str | None:
    m = _LOG_TS.match(line) or _JSON_TS.search(line)
    return f"{m[1].decode()} {m[2].decode()}" if m else None


def _decode_nodes(bundle: Path) -> list[str]:
    return sorted(d.name for d in (bundle / "engine").iterdir() if d.is_dir() and d.name.startswith("decode"))


def outage(bundle: Path, rng: random.Random) -> Damage:
    # a node that serves responses; the one without page telemetry when there is one: there the logs
    # are the only evidence, and an outage hides the most
    dark = [n for n in _decode_nodes(bundle) if not any((bundle / "pages").glob(f"{n}.*"))]
    node = rng.choice(dark or _decode_nodes(bundle))
    files = sorted(p for p in (bundle / "engine" / node).iterdir() if p.is_file())
    times = sorted({t for p in files for ln in _lines(_read(p)) if (t := _ts(ln))})
    times = times[1:]  # past the start-up lines, all written at the start time
    a = int(len(times) * rng.uniform(0.2, 0.6))
    t0, t1 = times[a], times[min(len(times) - 1, a + len(times) * 15 // 100)]
    lost = 0
    for p in files:
        keep, cur = [], None
        for ln in _lines(_read(p)):
            cur = _ts(ln) or cur  # a line without a time goes with the line it continues
            if cur is not None and t0 <= cur <= t1:
                lost += 1
            else:
                keep.append(ln)
        _write(p, b"".join(keep))
    return Damage("outage", f"engine/{node}", "engine", f"every line from {t0} to {t1} lost ({lost} lines)",
                  records_lost=lost, node=node, span=(t0, t1))  # fmt: skip


def _page_files(bundle: Path) -> list[Path]:
    return _files(bundle, "pages", ".parquet", ".jsonl", ".jsonl.gz")


def page_file_cut(bundle: Path, rng: random.Random) -> Damage:
    path = rng.choice([p for p in _page_files(bundle) if p.name.endswith(".parquet")])
    n = pq.ParquetFile(path).metadata.num_rows
    data = path.read_bytes()
    offset = int(len(data) * rng.uniform(0.3, 0.9))
    path.write_bytes(data[:offset])
    return Damage("page_file_cut", _rel(bundle, path), "pages", f"Parquet file cut at byte {offset} of {len(data)}",
                  records_lost=n, node=path.name.split(".")[0], offset=offset)  # fmt: skip


def seq_gap(bundle: Path, rng: random.Random) -> Damage:
    path = rng.choice(_page_files(bundle))
    if path.name.endswith(".parquet"):
        t = pq.read_table(path).sort_by("seq")
        seqs = t.column("seq").to_pylist()
    else:
        rows = [json.loads(ln) for ln in _lines(_read(path)) if ln.strip()]
        seqs = sorted(r["seq"] for r in rows)
    n = max(20, len(seqs) // 20)
    a = int(len(seqs) * rng.uniform(0.3, 0.7))
    lo, hi = seqs[a], seqs[min(len(seqs) - 1, a + n - 1)]
    if path.name.endswith(".parquet"):
        whole = pq.read_table(path)
        pq.write_table(whole.filter(pc.or_(pc.less(whole["seq"], lo), pc.greater(whole["seq"], hi))), path)
    else:
        keep = [ln for ln in _lines(_read(path)) if not ln.strip() or not lo <= json.loads(ln)["seq"] <= hi]
        _write(path, b"".join(keep))
    lost = sum(lo <= s <= hi for s in seqs)
    return Damage("seq_gap", _rel(bundle, path), "pages", f"page events seq {lo}..{hi} lost ({lost} events)",
                  records_lost=lost, node=path.name.split(".")[0], seqs=(lo, hi))  # fmt: skip


def _text_target(bundle: Path, rng: random.Random) -> tuple[Path, str]:
    """A line-oriented input of one of the three sources, chosen by the rng."""
    source = rng.choice(["gateway", "engine", "pages"])
    if source == "engine":
        return rng.choice(_files(bundle, "engine", ".log", ".jsonl")), source
    found = [p for p in _files(bundle, source) if not p.name.endswith(".parquet")]
    if not found:  # every page file is Parquet: the engine log instead
        return rng.choice(_files(bundle, "engine", ".log", ".jsonl")), "engine"
    return rng.choice(found), source


def _node_of(bundle: Path, path: Path, source: str) -> str | None:
    if source == "engine":
        return path.parent.name
    return path.name.split(".")[0] if source == "pages" else None


def duplicated(bundle: Path, rng: random.Random) -> Damage:
    path, source = _text_target(bundle, rng)
    lines = _lines(_read(path))
    head = 1 if _has_header(path) else 0
    n = max(10, (len(lines) - head) // 10)
    a = rng.randrange(head, max(head + 1, len(lines) - n))
    block = lines[a : a + n]
    at = rng.randrange(a + n, len(lines) + 1)  # the retried chunk arrives again, after the first delivery
    _write(path, b"".join(lines[:at] + block + lines[at:]))
    return Damage("duplicated", _rel(bundle, path), source, f"lines {a + 1}..{a + n} delivered twice",
                  node=_node_of(bundle, path, source), duplicated=len(block), invariant=True)  # fmt: skip


def reordered(bundle: Path, rng: random.Random) -> Damage:
    path, source = _text_target(bundle, rng)
    lines = _lines(_read(path))
    head = 1 if _has_header(path) else 0
    body = lines[head:]
    k = 6
    size = -(-len(body) // k)
    blocks = [body[i : i + size] for i in range(0, len(body), size)]
    order = list(range(len(blocks)))
    while order == sorted(order) and len(order) > 1:
        rng.shuffle(order)
    _write(path, b"".join(lines[:head] + [ln for i in order for ln in blocks[i]]))
    return Damage("reordered", _rel(bundle, path), source, f"{len(blocks)} blocks of lines in order {order}",
                  node=_node_of(bundle, path, source), invariant=True)  # fmt: skip


def gateway_file_missing(bundle: Path, rng: random.Random) -> Damage:
    files = _files(bundle, "gateway")
    if len(files) == 1 and not files[0].name.endswith(".parquet"):
        files = _split(files[0], 4)
    path = rng.choice(files)
    if path.name.endswith(".parquet"):
        n = pq.ParquetFile(path).metadata.num_rows
    else:
        n = _count_records(_read(path), _has_header(path))
    rel = _rel(bundle, path)
    path.unlink()
    return Damage("gateway_file_missing", rel, "gateway", f"{rel} never delivered ({n} records)", records_lost=n,
                  named=False)  # fmt: skip


def _split(path: Path, parts: int) -> list[Path]:
    """One export file as `parts` time-ordered files (<stem>-partN<suffix>), the way per-period exports come."""
    lines = _lines(_read(path))
    head = lines[:1] if _has_header(path) else []
    body = lines[len(head) :]
    stem, _, suffix = path.name.partition(".")
    if suffix not in ("jsonl", "jsonl.gz", "csv", "csv.gz", "json", "log"):  # a dated name (smg.2026-08-29)
        stem, suffix = path.name, "log"
    size = -(-len(body) // parts)
    out = []
    for i in range(parts):
        p = path.with_name(f"{stem}-part{i + 1}.{suffix}")
        _write(p, b"".join(head + body[i * size : (i + 1) * size]))
        out.append(p)
    path.unlink()
    return out


KINDS: dict[str, Callable[[Path, random.Random], Damage]] = {
    f.__name__: f
    for f in (gzip_cut, gzip_cut_engine, column_dropped, outage, page_file_cut, seq_gap, duplicated, reordered,
              gateway_file_missing)
}  # fmt: skip


def apply(kind: str, bundle: Path, seed: int) -> Damage:
    """Damage `bundle` (a copy: it is changed in place) with `kind`, seeded by `seed`."""
    return KINDS[kind](bundle, random.Random(f"{kind}:{seed}"))
