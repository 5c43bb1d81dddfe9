"""Issue #33, the text a gateway log holds: every text-carrying format's prompt and response read where
its writer puts them (records built from the documented schemas: the gateway fixtures of
tests/fixtures/gateway/ with their content fields filled as LiteLLM and the OTel gen_ai conventions
write them), stored as fingerprints only, never as text."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

from forensics.db import connect
from forensics.ingest import content, ingest_gateway

FIXTURES = Path(__file__).parent.parent / "fixtures" / "gateway"
PLANT = "Quixotic zebrafish planted canary"
PROMPT = f"{PLANT} asks about the tidal schedule of the northern harbour in late autumn please"
SYSTEM = "You are a careful assistant for harbour logistics and you answer briefly"
RESPONSE = f"The northern harbour {PLANT} tides peak twice daily near the lighthouse at dawn"


def _first(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text().splitlines()[0])


def _fingerprints(b: Path) -> tuple[dict[tuple[str, str], set[int]], Path]:
    db = b.parent / "db.duckdb"
    con = connect(db)
    try:
        ingest_gateway(con, b)
        rows = con.execute(
            """SELECT g.request_id, c.side, c.h FROM content_fingerprints c
               JOIN gateway g ON g.file_id = c.file_id AND g.row = c.row ORDER BY ALL"""
        ).fetchall()
    finally:
        con.close()
    out: dict[tuple[str, str], set[int]] = {}
    for rid, side, h in rows:
        out.setdefault((rid, side), set()).add(h)
    return out, db


def _expect(text: str) -> set[int]:
    return set(content.fingerprints(text)[1].tolist())


def _bundle(tmp: Path, name: str, data: str | bytes, toml: str = "") -> Path:
    b = tmp / "bundle"
    (b / "gateway").mkdir(parents=True)
    (b / "gateway" / name).write_bytes(data.encode() if isinstance(data, str) else data)
    if toml:
        (b / "bundle.toml").write_text(toml)
    return b


def _no_text(db: Path) -> None:
    """The planted words are nowhere in the database file (nor in a temp folder left beside it)."""
    for p in [db, *db.parent.glob("*.tmp/**/*")]:
        if p.is_file():
            raw = p.read_bytes().lower()
            for w in ("quixotic", "zebrafish", "lighthouse"):
                assert w.encode() not in raw, (p, w)


def test_words_and_fingerprints() -> None:
    assert content.words("Héllo, WORLD! ﬁne_2") == ["héllo", "world", "fine_2"]
    assert content.fingerprints("too short")[0].size == 0
    pos, h = content.fingerprints(PROMPT)
    assert pos.tolist() == sorted(set(pos.tolist())) and pos.max() <= len(content.words(PROMPT)) - content.SHINGLE
    # a run of SHINGLE + WINDOW - 1 words shared by two texts shares a fingerprint, wherever it sits
    words = content.words(PROMPT)
    run = " ".join(words[3 : 3 + content.SHINGLE + content.WINDOW - 1])
    assert _expect(f"lorem ipsum dolor {run} sit amet consectetur") & set(h.tolist())
    assert content.fingerprints(PROMPT.upper())[1].tolist() == h.tolist()  # case and punctuation fold


def test_text_of_messages_and_parts() -> None:
    msgs = [{"role": "system", "content": "a b"}, {"role": "user", "content": [{"type": "text", "text": "c d"}]}]
    assert content.text_of(msgs) == "a b\nc d"
    otel = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "e f"}]}])
    assert content.text_of(otel) == "e f"
    assert (
        content.text_of({"id": "x", "model": "m", "choices": [{"message": {"role": "assistant", "content": "g"}}]})
        == "g"
    )


def test_litellm_payload_messages_and_response(tmp_path: Path) -> None:
    rec = _first("litellm_payload.jsonl")
    rec["messages"] = [{"role": "system", "content": SYSTEM},
                       {"role": "user", "content": [{"type": "text", "text": PROMPT}]}]  # fmt: skip
    rec["response"] = {"id": rec["id"], "object": "chat.completion", "model": "m",
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": RESPONSE}}]}  # fmt: skip
    redacted = dict(rec, id="chatcmpl-redacted", messages=[{"role": "user", "content": "redacted-by-litellm"}])
    b = _bundle(tmp_path, "litellm_payload.jsonl", json.dumps(rec) + "\n" + json.dumps(redacted) + "\n")
    fps, db = _fingerprints(b)
    assert fps[(rec["id"], "prompt")] == _expect(f"{SYSTEM}\n{PROMPT}")
    assert fps[(rec["id"], "response")] == _expect(RESPONSE)
    assert ("chatcmpl-redacted", "prompt") not in fps  # turn_off_message_logging: 3 words, no fingerprint
    _no_text(db)


def test_litellm_spendlogs_stored_prompts(tmp_path: Path) -> None:
    """store_prompts_in_spend_logs: messages and response as jsonb columns (older proxies), or messages
    '{}' and the request body in proxy_server_request (newer ones)."""
    rows = list(csv.DictReader(io.StringIO((FIXTURES / "litellm_spendlogs.csv").read_text())))
    old, new = dict(rows[0]), dict(rows[0])
    old["messages"] = json.dumps([{"role": "user", "content": PROMPT}])
    old["response"] = json.dumps({"choices": [{"message": {"role": "assistant", "content": RESPONSE}}]})
    new["request_id"] = "chatcmpl-newer-proxy"
    new["messages"] = "{}"
    new["proxy_server_request"] = json.dumps({"model": "m", "messages": [{"role": "user", "content": PROMPT}]})
    new["response"] = "{}"
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows([old, new])
    fps, db = _fingerprints(_bundle(tmp_path, "spend_logs.csv", buf.getvalue()))
    assert fps[(old["request_id"], "prompt")] == _expect(PROMPT) == fps[("chatcmpl-newer-proxy", "prompt")]
    assert fps[(old["request_id"], "response")] == _expect(RESPONSE)
    assert ("chatcmpl-newer-proxy", "response") not in fps
    _no_text(db)


def test_a_key_given_twice_is_read_as_python_reads_it(tmp_path: Path) -> None:
    """A hostile record names a text field twice, the first copy empty (DuckDB's JSON reader takes the
    first, Python's the last), or spells the key with an escape: its text is fingerprinted all the same."""
    rec = _first("litellm_payload.jsonl")
    body = json.dumps([{"role": "user", "content": PROMPT}])
    twice = json.dumps(dict(rec, id="twice", messages=[], response={}))[:-1] + f', "messages": {body}}}'
    escaped = json.dumps(dict(rec, id="escaped", messages=[], response={}))[:-1] + f', "m\\u0065ssages": {body}}}'
    assert json.loads(twice)["messages"] and json.loads(escaped)["messages"]
    b = _bundle(tmp_path, "litellm_payload.jsonl", twice + "\n" + escaped + "\n")
    fps, db = _fingerprints(b)
    assert fps[("twice", "prompt")] == _expect(PROMPT) == fps[("escaped", "prompt")]

    rows = list(csv.DictReader(io.StringIO((FIXTURES / "litellm_spendlogs.csv").read_text())))
    row = dict(rows[0], request_id="csv-twice", messages="{}")
    row["proxy_server_request"] = '{"messages": [], "model": "m", "messages": ' + body + "}"
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerow(row)
    fps, _ = _fingerprints(_bundle(tmp_path / "csv", "spend_logs.csv", buf.getvalue()))
    assert fps[("csv-twice", "prompt")] == _expect(PROMPT)


def _kv(key: str, value: str) -> dict:
    return {"key": key, "value": {"stringValue": value}}


def test_otlp_gen_ai_content_in_each_convention(tmp_path: Path) -> None:
    """v1.37+ attributes (messages of parts as JSON), the v1.26 content events, OpenLLMetry's indexed
    attributes: each span's prompt and completion."""
    base = json.loads((FIXTURES / "otlp.jsonl").read_text().splitlines()[0])
    span0 = base["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    spans = []
    for i, how in enumerate(("attributes", "events", "openllmetry")):
        s = json.loads(json.dumps(span0))
        s["spanId"] = f"{i + 1:016x}"
        s["traceId"] = f"{i + 1:032x}"
        s["attributes"] = [a for a in s["attributes"] if not a["key"].startswith("http.request.header.")]
        s["attributes"].append({"key": "http.request.header.x-request-id", "value": {"arrayValue": {"values": [
            {"stringValue": f"req-{how}"}]}}})  # fmt: skip
        if how == "attributes":
            text_in = [{"role": "user", "parts": [{"type": "text", "content": PROMPT}]}]
            s["attributes"] += [
                _kv("gen_ai.input.messages", json.dumps(text_in)),
                _kv("gen_ai.output.messages", json.dumps([{"role": "assistant", "finish_reason": "stop",
                                                           "parts": [{"type": "text", "content": RESPONSE}]}])),
            ]  # fmt: skip
        elif how == "events":
            s["events"] = [
                {"timeUnixNano": s["startTimeUnixNano"], "name": "gen_ai.content.prompt",
                 "attributes": [_kv("gen_ai.prompt", json.dumps([{"role": "user", "content": PROMPT}]))]},
                {"timeUnixNano": s["endTimeUnixNano"], "name": "gen_ai.content.completion",
                 "attributes": [_kv("gen_ai.completion", json.dumps([{"role": "assistant", "content": RESPONSE}]))]},
            ]  # fmt: skip
        else:
            s["attributes"] += [_kv("gen_ai.prompt.0.role", "user"), _kv("gen_ai.prompt.0.content", PROMPT),
                                _kv("gen_ai.completion.0.content", RESPONSE)]  # fmt: skip
        spans.append(s)
    base["resourceSpans"][0]["scopeSpans"][0]["spans"] = spans
    fps, db = _fingerprints(_bundle(tmp_path, "traces.jsonl", json.dumps(base) + "\n"))
    for how in ("attributes", "events", "openllmetry"):
        assert fps[(f"req-{how}", "prompt")] == _expect(PROMPT), how
        assert fps[(f"req-{how}", "response")] == _expect(RESPONSE), how
    _no_text(db)


def test_mapping_text_fields(tmp_path: Path) -> None:
    rec = {"when": "2026-09-01T12:00:00Z", "rid": "r-1", "tenant": "acme", "code": 200,
           "req": {"body": json.dumps({"prompt": PROMPT})}, "out": {"text": RESPONSE}}  # fmt: skip
    b = _bundle(tmp_path, "proxy.jsonl", json.dumps(rec) + "\n", '[gateway]\nmapping = "mapping.toml"\n')
    (b / "mapping.toml").write_text(
        '[detect]\nfields = ["when", "rid"]\n[fields]\nts = "when"\nrequest_id = "rid"\naccount_id = "tenant"\n'
        'status = "code"\nprompt_text = "req.body.prompt"\nresponse_text = "out.text"\n'
    )
    fps, db = _fingerprints(b)
    assert fps == {("r-1", "prompt"): _expect(PROMPT), ("r-1", "response"): _expect(RESPONSE)}
    _no_text(db)


def test_formats_without_text_store_none(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES, tmp_path / "f")
    b = tmp_path / "bundle"
    (b / "gateway").mkdir(parents=True)
    for name in ("smg.jsonl", "envoy.jsonl", "litellm_payload.jsonl"):
        shutil.copy(tmp_path / "f" / name, b / "gateway" / name)
    fps, _ = _fingerprints(b)
    assert fps == {}  # the fixtures' LiteLLM payloads are redacted (turn_off_message_logging)


def test_a_broken_line_of_a_text_format_is_not_quoted(tmp_path: Path) -> None:
    rec = {"when": "2026-09-01T12:00:00Z", "rid": "r-1", "tenant": "acme", "code": 200, "out": {"text": RESPONSE}}
    broken = '{"text": "' + PROMPT + '", "when": '  # cut short: not JSON
    b = _bundle(tmp_path, "proxy.jsonl", json.dumps(rec) + "\n" + broken + "\n", '[gateway]\nmapping = "m.toml"\n')
    (b / "m.toml").write_text(
        '[detect]\nfields = ["when", "rid"]\n[fields]\nts = "when"\nrequest_id = "rid"\naccount_id = "tenant"\n'
        'status = "code"\nresponse_text = "out.text"\n'
    )
    _, db = _fingerprints(b)
    con = connect(db)
    try:
        reasons = [r[0] for r in con.execute("SELECT reason FROM rejected").fetchall()]
    finally:
        con.close()
    assert reasons == ["not a JSON object (not quoted: the format logs prompt text)"]
    _no_text(db)
