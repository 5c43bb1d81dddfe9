"""The simulator's gateway log in the real tools' formats (forensics.gateway_formats), checked from the
files it wrote, read back with the standard library only, against the spec's records of the same run."""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import re
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from forensics.gateway_formats.envoy import render_envoy
from forensics.gateway_formats.litellm import render_payload
from forensics.gateway_formats.litellm_spendlogs import SPENDLOGS_COLUMNS, pg_csv, render_spendlogs
from forensics.gateway_formats.otlp import render_otlp
from forensics.gateway_formats.smg import render_smg
from forensics.simulate import build_config, simulate
from forensics.simulate.config import GATEWAY_FORMATS, SimConfig
from forensics.simulate.request import Request

KW = dict(seed=6, requests=260, abort_rate=0.06, long_rate=0.05, oversize_rate=0.03, internal_rate=0.15)
FORMATS = [f for f in GATEWAY_FORMATS if f != "kvf"]
NASTY_UA = "evil \"agent\", with, commas\nand a newline\r\tand\u202etail; =cmd|'/C calc'!A0 \\ <x>"


def _run(tmp_path_factory: pytest.TempPathFactory, fmt: str) -> Path:
    out = tmp_path_factory.mktemp(fmt)
    simulate(out, build_config("default", gateway_format=fmt, **KW))  # type: ignore[arg-type]
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return {fmt: _run(tmp_path_factory, fmt) for fmt in GATEWAY_FORMATS}


@pytest.fixture(scope="module")
def spec(runs: dict[str, Path]) -> dict[str, dict]:
    """The spec's gateway records of the same run (kvf), by request_id."""
    g = runs["kvf"] / "bundle" / "gateway"
    recs = [json.loads(x) for x in (g / "gw-a.jsonl").read_text().splitlines()]
    recs += [json.loads(x) for x in gzip.decompress((g / "gw-b.jsonl.gz").read_bytes()).decode().splitlines()]
    with open(g / "gw-c.csv", newline="") as f:
        for row in csv.DictReader(f):
            for k in ("status", "prompt_tokens", "completion_tokens", "bootstrap_room"):
                row[k] = int(row[k])
            row["duration_ms"] = float(row["duration_ms"])
            row["headers"] = json.loads(row["headers"]) if row["headers"] else None
            recs.append(row)
    for row in pq.read_table(g / "gw-d.parquet").to_pylist():
        row["ts"] = row["ts"].strftime("%Y-%m-%dT%H:%M:%S.") + f"{row['ts'].microsecond // 1000:03d}Z"
        row["headers"] = json.loads(row["headers"]) if row["headers"] else None
        recs.append(row)
    for r in recs:
        r.setdefault("headers", None)  # the JSON lines leave it out when there are none
    return {r["request_id"]: r for r in recs}


def _us(iso: str) -> int:
    return int(round(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1e6))


def _naive_utc_us(text: str) -> int:
    fmt = "%Y-%m-%d %H:%M:%S.%f" if "." in text else "%Y-%m-%d %H:%M:%S"
    return int(round(datetime.strptime(text, fmt).replace(tzinfo=UTC).timestamp() * 1e6))


def _ids(out: Path) -> dict[str, dict[str, str]]:
    with open(out / "truth" / "gateway_ids.csv", newline="") as f:
        return {r["spec_request_id"]: r for r in csv.DictReader(f)}


def _engine(out: Path) -> list[tuple[str, dict]]:
    recs = []
    for p in sorted((out / "bundle" / "engine").glob("*/requests.jsonl")):
        recs += [(p.parent.name, json.loads(x)) for x in p.read_text().splitlines()]
    return recs


def _decode_rid(out: Path) -> dict[int, str]:
    """room -> the decode rid of a finished (not aborted) request."""
    return {
        rec["obj"]["bootstrap_room"]: rec["rid"]
        for node, rec in _engine(out)
        if node.startswith("decode") and rec["out"]["meta_info"]["finish_reason"]["type"] != "abort"
    }


def _files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_config_names_and_checks_the_format() -> None:
    assert build_config("default").gateway_format == "kvf"
    assert build_config("default", gateway_format="otlp").gateway_format == "otlp"
    with pytest.raises(ValueError, match="gateway format"):
        build_config("default", gateway_format="nginx")


def test_the_run_is_the_same_in_every_format(runs: dict[str, Path], spec: dict[str, dict]) -> None:
    """The format changes the gateway files only: the engines' logs, pages and truth stay, and the spec's
    gateway files are gone; engine records carry x-request-id only where the format joins by it."""
    assert len(spec) == KW["requests"]
    assert Counter(r["status"] for r in spec.values()).keys() >= {200, 400, 499}
    base = _files(runs["kvf"])
    for fmt, out in runs.items():
        files = _files(out)
        for name, data in base.items():
            if name.startswith(("bundle/pages/", "truth/responses", "truth/exposures")):
                assert files[name] == data, (fmt, name)
        gw = {n for n in files if n.startswith("bundle/gateway/")}
        assert (fmt in ("kvf", "kvf_noroom")) == any("gw-a.jsonl" in n for n in gw), fmt
        assert ("truth/gateway_ids.csv" in files) == (fmt in ("litellm_spendlogs", "litellm_payload", "otlp"))
        assert ("[gateway]" in (out / "bundle" / "bundle.toml").read_text()) == (fmt == "envoy"), fmt
        for name, data in base.items():
            if name.endswith("server.log"):
                assert files[name] == data, (fmt, name)
        stripped = [{k: v for k, v in r.items() if k != "headers"} for _n, r in _engine(out)]
        assert stripped == [r for _n, r in _engine(runs["kvf"])], fmt
        with_headers = {json.dumps(r.get("headers")) for _n, r in _engine(out)}
        if fmt in ("smg", "envoy", "kvf_noroom"):
            assert "null" not in with_headers
        else:
            assert with_headers == {"null"}


def test_engine_records_carry_the_forwarded_request_id(runs: dict[str, Path], spec: dict[str, dict]) -> None:
    room_of = {r["bootstrap_room"]: rid for rid, r in spec.items()}
    for fmt in ("smg", "envoy", "kvf_noroom"):
        recs = _engine(runs[fmt])
        assert recs
        for node, rec in recs:
            keys = list(rec)
            assert keys.index("headers") == keys.index("obj") + 1 and keys[-1] == "out", keys  # request_logger.py
            assert rec["headers"] == {"x-request-id": room_of[rec["obj"]["bootstrap_room"]]}, node
        assert {"prefill", "decode"} <= {n.split("-")[0] for n, _ in recs}


def test_litellm_spendlogs(runs: dict[str, Path], spec: dict[str, dict]) -> None:
    out = runs["litellm_spendlogs"]
    raw = (out / "bundle" / "gateway" / "spend_logs.csv").read_text()
    with open(out / "bundle" / "gateway" / "spend_logs.csv", newline="") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames or ()) == SPENDLOGS_COLUMNS
        rows = list(reader)
    assert not {"bootstrap_room", "prefill_node", "decode_node"} & set(SPENDLOGS_COLUMNS)
    assert len(rows) == len(spec)
    ids = _ids(out)
    by_format = {v["format_request_id"]: k for k, v in ids.items()}
    assert len(by_format) == len(spec)
    decode_rid = _decode_rid(out)
    for row in rows:
        s = spec[by_format[row["request_id"]]]
        ok = s["status"] == 200
        assert row["status"] == ("success" if ok else "failure")
        assert row["request_id"] == (decode_rid[s["bootstrap_room"]] if ok else row["request_id"])
        if not ok:  # a failure has no response id: LiteLLM's own call id, a UUID
            assert re.fullmatch(
                r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", row["request_id"]
            )
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{1,3})?", row["startTime"])  # timestamp(3), no zone
        assert abs(_naive_utc_us(row["startTime"]) - _us(s["ts"])) <= 1000
        assert abs(int(row["request_duration_ms"]) - s["duration_ms"]) <= 1
        assert row["team_id"] == s["account_id"]
        assert row["api_key"] == hashlib.sha256(s["api_token_id"].encode()).hexdigest()
        assert row["requester_ip_address"] == s["client_ip"]
        assert row["model_group"] == s["model"] and row["call_type"] == "acompletion"
        if ok:
            tokens = (s["prompt_tokens"], s["completion_tokens"])
            assert (int(row["prompt_tokens"]), int(row["completion_tokens"])) == tokens
        else:  # LiteLLM's own estimate of the failed prompt (BerriAI/litellm#37365): near the engine's, no usage
            assert int(row["completion_tokens"]) == 0 and int(row["prompt_tokens"]) >= 1
        assert int(row["total_tokens"]) == int(row["prompt_tokens"]) + int(row["completion_tokens"])
        md = json.loads(row["metadata"])
        assert md["user_api_key_alias"] == s["api_token_id"] and md["user_api_key_team_id"] == s["account_id"]
        assert md["status"] == row["status"]
        assert ("error_information" in md) == (not ok)
        if not ok:
            assert md["error_information"]["error_code"] == str(s["status"])
        assert f"User-Agent: {s['user_agent']}" in json.loads(row["request_tags"])
        assert json.loads(row["messages"]) == {} and row["session_id"]
    assert ',"",' in raw  # an empty string is "" (a NULL is nothing): psql's CSV


def test_litellm_payload(runs: dict[str, Path], spec: dict[str, dict]) -> None:
    out = runs["litellm_payload"]
    lines = (out / "bundle" / "gateway" / "litellm_payload.jsonl").read_text().splitlines()
    assert len(lines) == len(spec)
    ids = {v["format_request_id"]: k for k, v in _ids(out).items()}
    decode_rid = _decode_rid(out)
    ends = []
    for line in lines:
        assert line.isascii()  # json.dumps escapes non-ASCII
        p = json.loads(line)
        s = spec[ids[p["id"]]]
        ok = s["status"] == 200
        assert {"id", "trace_id", "call_type", "status", "startTime", "endTime", "model", "model_group",
                "prompt_tokens", "completion_tokens", "total_tokens", "requester_ip_address", "end_user",
                "request_tags", "metadata", "error_information", "user_agent"} <= set(p)  # fmt: skip
        assert p["status"] == ("success" if ok else "failure")
        assert p["id"] == (decode_rid[s["bootstrap_room"]] if ok else p["id"])
        assert isinstance(p["startTime"], float) and abs(p["startTime"] * 1e6 - _us(s["ts"])) < 1000
        assert abs((p["endTime"] - p["startTime"]) * 1000 - s["duration_ms"]) < 0.1
        assert p["model_group"] == s["model"] and p["call_type"] == "acompletion"
        assert p["requester_ip_address"] == s["client_ip"] and p["user_agent"] == s["user_agent"]
        tokens = (s["prompt_tokens"], s["completion_tokens"]) if ok else (0, 0)
        assert (p["prompt_tokens"], p["completion_tokens"], p["total_tokens"]) == (*tokens, sum(tokens))
        md = p["metadata"]
        assert md["user_api_key_hash"] == hashlib.sha256(s["api_token_id"].encode()).hexdigest()
        assert md["user_api_key_alias"] == s["api_token_id"] and md["user_api_key_team_id"] == s["account_id"]
        assert md["user_api_key_org_id"] is None and md["user_api_key_user_id"] is None
        assert md["requester_custom_headers"] == (s["headers"] or {})
        assert p["error_information"]["error_code"] == ("" if ok else str(s["status"]))
        assert p["end_user"] == "" and "bootstrap_room" not in line
        ends.append(p["endTime"])
    assert ends == sorted(ends)  # written as requests complete


def test_smg(runs: dict[str, Path], spec: dict[str, dict]) -> None:
    out = runs["smg"]
    paths = sorted((out / "bundle" / "gateway").iterdir())
    assert paths and all(re.fullmatch(r"smg\.\d{4}-\d\d-\d\d", p.name) for p in paths)
    lines = [json.loads(x) for p in paths for x in p.read_text().splitlines()]
    by_id: dict[str, list[dict]] = {}
    for rec in lines:
        assert list(rec)[:3] == ["timestamp", "level", "message"]
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}", rec["timestamp"])  # ChronoUtc, no zone
        if "span" in rec:
            assert rec["span"]["name"] == "http_request" and rec["spans"] == [rec["span"]]
            keys = [k for k in rec["span"] if k != "name"]
            assert keys == sorted(keys)
            by_id.setdefault(rec["span"]["request_id"], []).append(rec)
    assert set(by_id) == set(spec)
    for rid, recs in by_id.items():
        s = spec[rid]
        start = recs[0]
        assert (start["message"], start["target"], start["level"]) == (
            "started processing request",
            "smg::request",
            "INFO",
        )
        assert abs(_naive_utc_us(start["timestamp"]) - _us(s["ts"])) < 1000
        assert "status_code" not in start["span"] and "account_id" not in start
        if s["status"] == 499:  # the client disconnected: no response, no second line
            assert len(recs) == 1
            continue
        assert len(recs) == 2
        fin = recs[1]
        assert fin["span"]["status_code"] == s["status"]
        assert abs(fin["span"]["latency"] / 1000 - s["duration_ms"]) <= 0.05  # µs
        want = {200: ("INFO", "finished processing request"), 400: ("WARN", "request failed with client error")}
        want[503] = ("ERROR", "request failed with server error")
        assert (fin["level"], fin["message"]) == want[s["status"]] and fin["target"] == "smg::response"
    assert sum(len(v) for v in by_id.values()) == 2 * len(spec) - sum(s["status"] == 499 for s in spec.values())


def test_envoy(runs: dict[str, Path], spec: dict[str, dict]) -> None:
    out = runs["envoy"]
    assert '[gateway]\ntenant = "x-tenant-id"' in (out / "bundle" / "bundle.toml").read_text()
    lines = (out / "bundle" / "gateway" / "access.jsonl").read_text().splitlines()
    assert len(lines) == len(spec)
    seen = set()
    for line in lines:
        rec = json.loads(line)
        assert list(rec) == sorted(rec)  # Envoy prints its JSON log's keys sorted
        s = spec[rec["x-request-id"]]
        seen.add(rec["x-request-id"])
        assert rec["start_time"] == s["ts"]  # RFC 3339, ms, UTC
        assert rec["x-tenant-id"] == s["account_id"] and rec["user-agent"] == s["user_agent"]
        assert rec["x-forwarded-for"] == s["client_ip"] and rec["genai_model_name"] == s["model"]
        assert 0 <= s["duration_ms"] - rec["duration"] <= 1  # whole ms, truncated
        if s["status"] == 499:
            assert (rec["response_code"], rec["response_flags"]) == (0, "DC")
        else:
            assert (rec["response_code"], rec["response_flags"]) == (s["status"], "-")
        tokens = (s["prompt_tokens"], s["completion_tokens"]) if s["status"] == 200 else (None, None)
        assert (rec["genai_tokens_input"], rec["genai_tokens_output"]) == tokens
        assert rec["x-internal-test"] == (s["headers"] or {}).get("x-internal-test")
        assert not {"bootstrap_room", "prefill_node", "decode_node", "account_id"} & set(rec)
    assert seen == set(spec)
    assert any(json.loads(x)["x-internal-test"] == "1" for x in lines)


def test_otlp(runs: dict[str, Path], spec: dict[str, dict]) -> None:
    out = runs["otlp"]
    ids = _ids(out)
    lines = (out / "bundle" / "gateway" / "traces.jsonl").read_text().splitlines()
    gateway: dict[str, dict] = {}
    engine: dict[str, list[tuple[str, dict]]] = {}
    for line in lines:
        for rs in json.loads(line)["resourceSpans"]:
            service = {a["key"]: a["value"] for a in rs["resource"]["attributes"]}["service.name"]["stringValue"]
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    assert re.fullmatch(r"[0-9a-f]{32}", span["traceId"]) and re.fullmatch(
                        r"[0-9a-f]{16}", span["spanId"]
                    )
                    assert span["startTimeUnixNano"].isdigit() and span["endTimeUnixNano"].isdigit()
                    if service == "envoy-ai-gateway":
                        assert span["kind"] == 2 and "parentSpanId" not in span
                        gateway[span["traceId"]] = span
                    else:
                        engine.setdefault(span["traceId"], []).append((service, span))
    assert len(gateway) == len(spec) == len(ids)
    for rid, s in spec.items():
        span = gateway[ids[rid]["trace_id"]]
        assert span["spanId"] == ids[rid]["format_request_id"]
        attrs = {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}
        assert int(span["startTimeUnixNano"]) // 1000 // 1000 == _us(s["ts"]) // 1000
        assert attrs["tenant.id"] == s["account_id"] and attrs["user_agent.original"] == s["user_agent"]
        assert attrs["client.address"] == s["client_ip"] and attrs["gen_ai.request.model"] == s["model"]
        if s["status"] == 499:
            assert "http.response.status_code" not in attrs and span["status"] == {"code": 2}
        else:
            assert attrs["http.response.status_code"] == str(s["status"])
        if s["status"] == 200:
            assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (
                str(s["prompt_tokens"]),
                str(s["completion_tokens"]),
            )
        if s["headers"]:
            assert attrs["http.request.header.x-internal-test"] == {"values": [{"stringValue": "1"}]}
        for service, es in engine.get(ids[rid]["trace_id"], []):
            ea = {a["key"]: next(iter(a["value"].values())) for a in es["attributes"]}
            role = service.split("-")[0]
            assert es["parentSpanId"] == span["spanId"] and es["kind"] == 1
            assert es["name"] == f"{role} Req {ea['rid'][:8]}"
            assert ea["bootstrap_room"] == hex(s["bootstrap_room"]) and ea["module"] == "sglang::request"
    assert sum(len(v) for v in engine.values()) == len(_engine(runs["kvf"]))


@pytest.mark.parametrize("fmt", FORMATS)
def test_same_seed_same_bytes(fmt: str, runs: dict[str, Path], tmp_path: Path) -> None:
    simulate(tmp_path / "b", build_config("default", gateway_format=fmt, **KW))  # type: ignore[arg-type]
    assert _files(runs[fmt]) == _files(tmp_path / "b")


def _nasty() -> tuple[list[Request], SimConfig]:
    cfg = build_config("default", seed=1)
    r = Request(
        idx=0, request_id="req-nasty", t0=cfg.start_us + 1_234_567, account='acct "x",y', token="tok,\"z\"",
        ip="192.0.2.1", ua=NASTY_UA, headers={"x-internal-test": 'a"b,\nc'}, L=10, out=5, sp_id=-1, sp_len=0,
        abort=False, prefill="prefill-0", decode="decode-0", room=12345, rid_p="p" * 32, rid_d="d" * 32, gw=0,
        status=200, completion=5, t_end=cfg.start_us + 2_000_000,
    )  # fmt: skip
    return [r], cfg


def test_hostile_values_survive_each_format() -> None:
    reqs, cfg = _nasty()
    rows = list(csv.DictReader(render_spendlogs(cfg, reqs, {}).files["spend_logs.csv"].decode().splitlines(True)))
    assert len(rows) == 1
    assert rows[0]["team_id"] == 'acct "x",y' and rows[0]["metadata"].count("\n") == 0
    ua_prefix = NASTY_UA.split("/")[0]  # LiteLLM tags the agent's product part and the whole agent
    assert json.loads(rows[0]["request_tags"]) == [f"User-Agent: {ua_prefix}", f"User-Agent: {NASTY_UA}"]
    assert json.loads(rows[0]["metadata"])["user_api_key_alias"] == 'tok,"z"'
    p = json.loads(render_payload(cfg, reqs, {}).files["litellm_payload.jsonl"])
    assert p["user_agent"] == NASTY_UA and p["metadata"]["requester_custom_headers"] == {"x-internal-test": 'a"b,\nc'}
    e = json.loads(render_envoy(cfg, reqs, {}).files["access.jsonl"])
    assert e["user-agent"] == NASTY_UA and e["x-internal-test"] == 'a"b,\nc' and e["x-tenant-id"] == 'acct "x",y'
    o = json.loads(render_otlp(cfg, reqs, {}).files["traces.jsonl"])
    attrs = {a["key"]: a["value"] for a in o["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"]}
    assert attrs["user_agent.original"] == {"stringValue": NASTY_UA}
    smg = render_smg(cfg, reqs, {}).files
    assert all(len(v.decode().splitlines()) == 3 for v in smg.values())  # start-up, started, finished
    for data in (*smg.values(), render_envoy(cfg, reqs, {}).files["access.jsonl"]):
        assert all(json.loads(x) for x in data.decode().split("\n") if x)  # one record a line


@pytest.mark.parametrize(
    "value", ["", None, "plain", 'q"uote', "com,ma", "new\nline", "cr\rx", "\\.", " sp ", '"', "\u202e", "0"]
)
def test_pg_csv_field_round_trips(value: str | None) -> None:
    line = ",".join(["a", pg_csv(value), "b"]) + "\n"
    assert list(csv.reader(io.StringIO(line, newline=""))) == [["a", value or "", "b"]]
    assert (pg_csv(value) == "") == (value is None)  # NULL is nothing, an empty string is ""


@pytest.mark.parametrize("fmt", ["litellm_payload", "litellm_spendlogs", "otlp"])
def test_texts_change_only_the_gateway_log(tmp_path: Path, fmt: str) -> None:
    """--texts / --echo-rate: the gateway log gains prompts and responses, truth/ gains echoes.csv; every
    other file (engine logs, page events, the other truth files) is the same bytes as without texts."""
    plain, texts = tmp_path / "plain", tmp_path / "texts"
    simulate(plain, build_config("default", seed=5, requests=200, gateway_format=fmt, no_telemetry="decode-2"))
    cfg = build_config("default", seed=5, requests=200, gateway_format=fmt, no_telemetry="decode-2", echo_rate=1.0)
    simulate(texts, cfg)
    a, b = _files(plain), _files(texts)
    changed = {n for n in a if a[n] != b.get(n)}
    assert changed == {n for n in a if n.startswith("bundle/gateway/")} | {"truth/summary.json"}
    assert set(b) - set(a) == {"truth/echoes.csv"}
    summary = json.loads(b["truth/summary.json"])
    assert summary["options"]["echo_rate"] == 1.0 and "echo_rate" not in json.loads(a["truth/summary.json"])["options"]
    echoes = list(csv.DictReader(io.StringIO(b["truth/echoes.csv"].decode())))
    truth = {(r["recipient_request_id"], r["source_request_id"]) for r in csv.DictReader(
        io.StringIO(b["truth/exposures.csv"].decode()))}  # fmt: skip
    assert {(r["recipient_request_id"], r["source_request_id"]) for r in echoes} == truth
    # echo rate 1: every pair whose recipient was served carries an echo
    assert sum(r["echoed"] == "1" for r in echoes) > 0.8 * len(echoes)


def test_echo_options_are_checked() -> None:
    with pytest.raises(ValueError, match="echo-rate"):
        build_config("default", gateway_format="otlp", echo_rate=1.5)
    with pytest.raises(ValueError, match="carries text"):
        build_config("default", gateway_format="smg", texts=True)
