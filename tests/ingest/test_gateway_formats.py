"""Gateway formats as their writers write them (tests/fixtures/gateway/, each built from the format's
documented schema or source: SOURCES.md cites them): every fixture is recognised without a flag and
read into the records expected.json states, field by field; bad configurations are errors naming the
file."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest

from forensics.db import connect
from forensics.errors import InputError
from forensics.ingest import ingest_gateway

FIXTURES = Path(__file__).parent.parent / "fixtures" / "gateway"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text())
FORMAT_OF = {
    "litellm_spendlogs.csv": "litellm_spendlogs",
    "litellm_spendlogs.json": "litellm_spendlogs",
    "litellm_payload.jsonl": "litellm_payload",
    "smg.jsonl": "smg",
    "envoy.jsonl": "envoy",
    "envoy_ai_gateway_semconv.jsonl": "envoy",
    "envoy_gateway_default.jsonl": "envoy",
    "otlp.jsonl": "otlp",
}
FIELDS = ("request_id", "account_id", "api_token_id", "client_ip", "user_agent", "model", "status",
          "prompt_tokens", "completion_tokens", "trace_id")  # fmt: skip


def _bundle(tmp: Path, name: str, toml: str = "") -> Path:
    b = tmp / "bundle"
    (b / "gateway").mkdir(parents=True)
    shutil.copy(FIXTURES / name, b / "gateway" / name)
    if toml:
        (b / "bundle.toml").write_text(toml)
    return b


def _records(b: Path) -> tuple[list[dict], list]:
    con = connect(b.parent / "db.duckdb")
    try:
        files = ingest_gateway(con, b)
        rows = con.execute(
            """SELECT request_id, account_id, api_token_id, client_ip, user_agent, model, status, prompt_tokens,
                      completion_tokens, trace_id, strftime(ts, '%Y-%m-%dT%H:%M:%S.%fZ') AS ts, duration_ms, engine_id,
                      CAST(attrs AS VARCHAR) AS attrs, CAST(headers AS VARCHAR) AS headers
               FROM gateway ORDER BY row"""
        ).fetchall()
        cols = [d[0] for d in con.description]
        rejected = con.execute("SELECT row, reason FROM rejected ORDER BY row").fetchall()
    finally:
        con.close()
    assert all(f.format == FORMAT_OF[f.rel.split("/")[-1]] for f in files), [(f.rel, f.format) for f in files]
    return [dict(zip(cols, r, strict=True)) for r in rows], rejected


@pytest.mark.parametrize("name", sorted(FORMAT_OF))
def test_fixture_reads_as_documented(tmp_path: Path, name: str) -> None:
    got, rejected = _records(_bundle(tmp_path, name))
    want = EXPECTED[name]
    assert rejected == []
    if name == "litellm_spendlogs.json":  # /spend/logs returns the rows newest first
        got = sorted(got, key=lambda r: r["ts"], reverse=True)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        for k in FIELDS:
            assert g[k] == w[k], (name, w["request_id"], k, g[k], w[k])
        assert g["ts"] == w["ts"], (name, k)
        if w["duration_ms"] is None:
            assert g["duration_ms"] is None
        else:
            assert g["duration_ms"] == pytest.approx(w["duration_ms"], abs=0.002), (name, w["request_id"])
        # the join tries both ids: the one the engines know must be among them
        if w["engine_id"] is not None:
            assert w["engine_id"] in (g["request_id"], g["engine_id"]), (name, w["engine_id"])
        attrs = json.loads(g["attrs"])
        assert attrs.pop("format") == FORMAT_OF[name]
        assert attrs == w["attrs"], (name, w["request_id"])


def test_otlp_engine_spans_give_rooms(tmp_path: Path) -> None:
    b = _bundle(tmp_path, "otlp.jsonl")
    con = connect(tmp_path / "db.duckdb")
    try:
        ingest_gateway(con, b)
        spans = con.execute("SELECT trace_id, rid, room, role FROM engine_spans ORDER BY trace_id, role").fetchall()
    finally:
        con.close()
    want = sorted(
        (s["trace_id"], s["rid"], s["room"], s["role"]) for r in EXPECTED["otlp.jsonl"] for s in r["engine_spans"]
    )
    assert sorted(spans) == want


def test_tenant_named_in_bundle_toml(tmp_path: Path) -> None:
    got, _ = _records(_bundle(tmp_path, "litellm_spendlogs.csv", '[gateway]\ntenant = "key_alias"\n'))
    assert [r["account_id"] for r in got] == [w["attrs"].get("key_alias") for w in EXPECTED["litellm_spendlogs.csv"]]


def test_malformed_json_column_rejects_its_row(tmp_path: Path) -> None:
    """A JSON column (SpendLogs metadata, request_tags) holding text that opens like JSON but does not
    parse: that row is rejected naming the column, the others load as before."""
    lines = (FIXTURES / "litellm_spendlogs.csv").read_text().splitlines(keepends=True)
    rows = list(csv.DictReader(io.StringIO("".join(lines))))
    rows[0]["metadata"] = "{broken"
    rows[2]["request_tags"] = '[ "User-Agent: curl'
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    b = tmp_path / "bundle"
    (b / "gateway").mkdir(parents=True)
    (b / "gateway" / "litellm_spendlogs.csv").write_text(buf.getvalue())
    got, rejected = _records(b)
    assert rejected == [(2, "malformed JSON in field metadata"), (4, "malformed JSON in field request_tags")]
    want = [w for i, w in enumerate(EXPECTED["litellm_spendlogs.csv"]) if i not in (0, 2)]
    assert [r["request_id"] for r in got] == [w["request_id"] for w in want]


def test_unknown_format_is_an_error_naming_the_file(tmp_path: Path) -> None:
    b = tmp_path / "bundle"
    (b / "gateway").mkdir(parents=True)
    (b / "gateway" / "access.jsonl").write_text('{"when": "2026-09-01T10:00:00Z", "who": "x"}\n')
    con = connect(tmp_path / "db.duckdb")
    try:
        files = ingest_gateway(con, b)
    finally:
        con.close()
    assert "matches no known gateway format" in (files[0].error or "")
    assert "when, who" in files[0].error


def _mapping_bundle(tmp: Path, time_lines: str) -> Path:
    b = tmp / "bundle"
    (b / "gateway").mkdir(parents=True)
    (b / "gateway" / "proxy.jsonl").write_text(
        json.dumps({"when": "2026-09-01 12:00:00.5", "rid": "r-1", "tenant": {"name": "acme"}, "code": 200,
                    "usage": {"in": 10, "out": 3}, "upstream": "chatcmpl-9", "x-internal-test": "1"}) + "\n"
    )  # fmt: skip
    (b / "mapping.toml").write_text(
        '[detect]\nfields = ["when", "rid"]\n[fields]\nts = "when"\nrequest_id = "rid"\naccount_id = "tenant.name"\n'
        'status = "code"\nprompt_tokens = "usage.in"\ncompletion_tokens = "usage.out"\nengine_id = "upstream"\n'
        f'[internal]\nheaders = ["x-internal-test"]\n{time_lines}'
    )
    (b / "bundle.toml").write_text('[gateway]\nmapping = "mapping.toml"\n')
    return b


def test_mapping_file_with_declared_zone(tmp_path: Path) -> None:
    b = _mapping_bundle(tmp_path, '[time]\ntimezone = "Europe/Berlin"\n')
    con = connect(tmp_path / "db.duckdb")
    try:
        files = ingest_gateway(con, b)
        row = con.execute(
            "SELECT strftime(ts, '%Y-%m-%dT%H:%M:%S.%f'), account_id, status, prompt_tokens, engine_id, "
            "CAST(headers AS VARCHAR) FROM gateway"
        ).fetchone()
    finally:
        con.close()
    assert files[0].format == "mapping"
    # 12:00:00.5 in Berlin (CEST, UTC+2) is 10:00:00.5 UTC
    assert row == ("2026-09-01T10:00:00.500000", "acme", 200, 10, "chatcmpl-9", '{"x-internal-test":"1"}')


def test_times_without_zone_need_one_declared(tmp_path: Path) -> None:
    b = _mapping_bundle(tmp_path, "")
    con = connect(tmp_path / "db.duckdb")
    try:
        files = ingest_gateway(con, b)
    finally:
        con.close()
    assert "carry no zone" in (files[0].error or "") and "[gateway] timezone" in files[0].error


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[gateway]\nformat = "nginx"\n', "is not one of"),
        ('[gateway]\ntimezone = "Mars/Olympus"\n', "is not a known time zone"),
        ('[gateway]\nformat = "mapping"\n', "needs mapping"),
        ('[gateway]\nmapping = "absent.toml"\n', "does not exist"),
    ],
)
def test_bad_gateway_settings(tmp_path: Path, toml: str, message: str) -> None:
    b = _bundle(tmp_path, "envoy.jsonl", toml)
    con = connect(tmp_path / "db.duckdb")
    try:
        with pytest.raises(InputError, match=message):
            ingest_gateway(con, b)
    finally:
        con.close()
