"""export-siem: each format's output read back by a parser written here from the format's own grammar
(tests/fixtures/siem/SOURCES.md), not by the code under test: the CEF header split on unescaped pipes,
the extension's key=value pairs found by their unescaped `=`, RFC 5424 syslog frames split by their ABNF,
HEC and ECS as JSON with their required fields and types. On the sample's findings: one event per row
of affected_responses.csv, its values equal to the CSV's; then hostile values in every field."""

from __future__ import annotations

import calendar
import csv
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from forensics.siem import export
from tests.support import TESTS

FIXTURES = TESTS / "fixtures" / "siem"
ALERTS = FIXTURES / "alerts.jsonl"  # one alert of each kind forensics watch --once raises on the sample

# ECS 9.4.0's allowed values (generated/ecs/ecs_flat.yml at v9.4.0)
ECS_KINDS = {"alert", "asset", "enrichment", "event", "metric", "state", "pipeline_error", "signal"}
ECS_CATEGORIES = {
    "api", "authentication", "configuration", "database", "driver", "email", "file", "host", "iam",
    "intrusion_detection", "library", "malware", "network", "package", "process", "registry", "session",
    "threat", "vulnerability", "web",
}  # fmt: skip
ECS_TYPES = {
    "access", "admin", "allowed", "change", "connection", "creation", "deletion", "denied", "device", "end",
    "error", "group", "indicator", "info", "installation", "protocol", "start", "user",
}  # fmt: skip
ECS_OUTCOMES = {"failure", "success", "unknown"}
# each category's expected event types (ecs_flat.yml: expected_event_types)
ECS_EXPECTED = {
    "intrusion_detection": {"allowed", "denied", "info"},
    "configuration": {"access", "change", "creation", "deletion", "info"},
}

HOSTILE = 'acct|x=y\\z\n"evil"\r\n=HYPERLINK("http://x")|CEF:0|'
HOSTILE_UA = 'Mozilla/5.0 (X11) "quoted" a=b c\\d |pipe| \n second line \r\n=cmd|"/c calc"!A1'


# ---- an independent CEF parser (CEF Implementation Standard, chapter 1, "Character Encoding") ----


def parse_cef(line: str) -> tuple[list[str], dict[str, str]]:
    """Header: seven fields after 'CEF:', split on pipes not escaped by a backslash (\\| and \\\\ the two
    escapes). Extension: each unescaped '=' ends a key (the word before it); the value runs to the space
    before the next key; in values \\= \\\\ \\n \\r are the escapes."""
    assert "\n" not in line and "\r" not in line, "a CEF event is one line"
    assert line.startswith("CEF:")
    fields, cur, i = [], [], 4
    while len(fields) < 7:
        ch = line[i]
        if ch == "\\":
            nxt = line[i + 1]
            assert nxt in "\\|", f"header escape \\{nxt} is not in the standard"
            cur.append(nxt)
            i += 2
            continue
        if ch == "|":
            fields.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    ext = line[i:]
    eqs = []  # positions of '=' not escaped (an even run of backslashes before it)
    for m in re.finditer("=", ext):
        run = len(ext[: m.start()]) - len(ext[: m.start()].rstrip("\\"))
        if run % 2 == 0:
            eqs.append(m.start())
    keys = []
    for pos in eqs:
        km = re.search(r"(?:^| )([A-Za-z0-9_]+)$", ext[:pos])
        assert km, f"no key before '=' at {pos}: {ext[max(0, pos - 30) : pos + 1]!r}"
        keys.append((km.start(1), pos, km.group(1)))
    out: dict[str, str] = {}
    for n, (_start, pos, key) in enumerate(keys):
        end = keys[n + 1][0] - 1 if n + 1 < len(keys) else len(ext)
        raw = ext[pos + 1 : end]
        val, j = [], 0
        while j < len(raw):
            if raw[j] == "\\":
                nxt = raw[j + 1]
                assert nxt in "\\=nr", f"extension escape \\{nxt} is not in the standard"
                val.append({"n": "\n", "r": "\r"}.get(nxt, nxt))
                j += 2
            else:
                assert raw[j] != "=", "an unescaped '=' inside a value"
                val.append(raw[j])
                j += 1
        assert key not in out, f"key {key} twice"
        out[key] = "".join(val)
    return fields, out


def labelled(ext: dict[str, str]) -> dict[str, str]:
    """cs1..cs6 and cn1..cn3 by their labels."""
    return {
        ext[f"{k}Label"]: ext[k] for k in [f"cs{i}" for i in range(1, 7)] + [f"cn{i}" for i in range(1, 4)] if k in ext
    }


def ms(iso: str) -> int:
    """Milliseconds since the epoch of a CSV time (2026-09-02T10:17:53.611Z), in integers."""
    whole, frac = iso.rstrip("Z").split(".")
    return calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) * 1000 + int(frac.ljust(3, "0")[:3])


# ---- an independent RFC 5424 reader ----

SYSLOG = re.compile(
    rb"<(?P<pri>\d{1,3})>(?P<ver>[1-9]\d{0,2}) (?P<ts>\S+) (?P<host>[\x21-\x7e]{1,255}) (?P<app>[\x21-\x7e]{1,48}) "
    rb"(?P<procid>[\x21-\x7e]{1,128}) (?P<msgid>[\x21-\x7e]{1,32}) (?P<sd>-|\[.*?\]) (?P<msg>.*)\Z",
    re.S,
)
RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})\Z")


def parse_syslog(frame: bytes) -> tuple[int, int, str]:
    m = SYSLOG.match(frame)
    assert m, frame[:120]
    assert m["ver"] == b"1" and RFC3339.match(m["ts"].decode())
    pri = int(m["pri"])
    assert pri <= 191
    msg = m["msg"]
    assert msg.startswith(b"\xef\xbb\xbf"), "MSG-UTF8 starts with a BOM"
    return pri // 8, pri % 8, msg[3:].decode("utf-8")


# ---- inputs ----


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def run(out: Path, fmt: str, tmp: Path, alerts: Path | None = None) -> list[str]:
    dest = tmp / f"events.{fmt}"
    export(out, fmt, alerts, dest)
    assert (dest.stat().st_mode & 0o777) == 0o600  # it holds customer identifiers
    return dest.read_text(encoding="utf-8").splitlines()


# ---- the sample's findings, one event per row, values equal to the CSV's ----


def test_cef_on_sample(sample_out: Path, tmp_path: Path) -> None:
    rows = read_csv(sample_out / "affected_responses.csv")
    lines = run(sample_out, "cef", tmp_path, ALERTS)
    assert len(lines) == len(rows) + len(ALERTS.read_text().splitlines())
    for row, line in zip(rows, lines, strict=False):
        head, ext = parse_cef(line)
        version, vendor, product, _dv, sig, name, sev = head
        assert (version, vendor, product) == ("0", "KV Forensics", "kv-forensics")
        assert sig == f"kvf-exposure-{row['evidence']}" and row["status"] in name
        assert int(sev) == {("confirmed", "pages"): 9, ("confirmed", "signature"): 8}.get(
            (row["status"], row["evidence"]), 5
        )
        assert ext["externalId"] == row["request_id"] and ext["duser"] == row["account_id"]
        assert ext["dhost"] == row["decode_node"] and ext["shost"] == row["prefill_node"]
        assert int(ext["rt"]) == ms(row["first_exposed_at"])
        lab = labelled(ext)
        for col, label in [("cohort", "cohort"), ("status", "status"), ("evidence", "evidence"), ("room", "room")]:
            assert lab[label] == row[col]
        assert lab.get("sourceRequests", "") == row["source_requests"]
        assert lab.get("exposedSlots", "") == row["exposed_slots"]
        assert ext.get("reason", "") == row["reason"]
        assert lab["incident"] == json.loads((sample_out / "manifest.json").read_text())["incident"]["id"]
    kinds = [json.loads(x)["kind"] for x in ALERTS.read_text().splitlines()]
    for kind, line in zip(kinds, lines[len(rows) :], strict=True):
        head, ext = parse_cef(line)
        assert head[4] == f"kvf-alert-{kind}" and labelled(ext)["alertKind"] == kind


def test_hec_on_sample(sample_out: Path, tmp_path: Path) -> None:
    rows = read_csv(sample_out / "affected_responses.csv")
    docs = [json.loads(x) for x in run(sample_out, "hec", tmp_path, ALERTS)]
    assert len(docs) == len(rows) + 3
    for row, d in zip(rows, docs, strict=False):
        assert isinstance(d["time"], int | float) and not isinstance(d["time"], bool)
        assert round(d["time"] * 1000) == ms(row["first_exposed_at"])
        for key in ("host", "source", "sourcetype"):
            assert isinstance(d[key], str) and d[key]
        assert d["host"] == row["decode_node"] and d["sourcetype"] == "kv_forensics:finding"
        ev = d["event"]
        assert isinstance(ev, dict)
        for col, cell in row.items():
            got = ev[col]
            assert ("" if got is None else str(got)) == cell, col
        assert isinstance(ev["severity"], int) and isinstance(ev["room"], str)
    assert {d["sourcetype"] for d in docs[len(rows) :]} == {"kv_forensics:alert"}
    assert all("index" not in d for d in docs)


def test_ecs_on_sample(sample_out: Path, tmp_path: Path) -> None:
    rows = read_csv(sample_out / "affected_responses.csv")
    docs = [json.loads(x) for x in run(sample_out, "ecs", tmp_path, ALERTS)]
    assert len(docs) == len(rows) + 3
    for d in docs:
        assert RFC3339.match(d["@timestamp"]) and isinstance(d["ecs"]["version"], str)
        e = d["event"]
        assert e["kind"] in ECS_KINDS and e["kind"] != "signal"  # signal is reserved for Kibana's own rules
        assert isinstance(e["category"], list) and set(e["category"]) <= ECS_CATEGORIES
        assert isinstance(e["type"], list) and set(e["type"]) <= ECS_TYPES
        for cat in e["category"]:
            assert set(e["type"]) <= ECS_EXPECTED[cat]
        assert e.get("outcome", "unknown") in ECS_OUTCOMES
        assert isinstance(e["severity"], int) and isinstance(e["id"], str) and isinstance(e["action"], str)
        assert isinstance(d["rule"]["name"], str) and isinstance(d["message"], str)
        assert all(isinstance(v, str) for v in d["labels"].values())  # labels are keywords, not objects
    for row, d in zip(rows, docs, strict=False):
        assert d["@timestamp"] == row["first_exposed_at"]
        assert d["organization"]["id"] == row["account_id"] and d["host"]["name"] == row["decode_node"]
        assert d["event"]["outcome"] == ("success" if row["status"] == "confirmed" else "unknown")
        assert d["event"].get("reason", "") == row["reason"]
        for col, cell in row.items():
            if col != "reason":
                assert d["labels"].get(col, "") == cell, col
    assert [d["event"]["action"] for d in docs[len(rows) :]] == [
        json.loads(x)["kind"] for x in ALERTS.read_text().splitlines()
    ]


# ---- hostile values ----


def test_hostile_values(hostile_out: tuple[Path, Path], tmp_path: Path) -> None:
    out, alerts = hostile_out
    rows = read_csv(out / "affected_responses.csv")
    for line in run(out, "cef", tmp_path, alerts):
        head, ext = parse_cef(line)
        assert len(head) == 7 and head[0] == "0"  # no value opened a header field or a line
        if head[4].startswith("kvf-exposure"):
            assert ext["duser"] == HOSTILE and labelled(ext)["cohort"] == HOSTILE
            assert ext["reason"] == HOSTILE_UA and ext["dhost"] == "decode|0=\\\n"
        else:
            assert ext["dhost"] == "decode|0=\\\n"
            assert ext["msg"] == HOSTILE_UA and labelled(ext)["evidenceText"] == HOSTILE_UA
            assert ext["filePath"] == "engine/x|=\\\n.log"
    first = parse_cef(run(out, "cef", tmp_path, alerts)[len(rows)])[0]
    assert first[4] == "kvf-alert-exposure|x=y\\ " and first[5] == "KV leak alert (exposure|x=y\\ )"
    for fmt in ("hec", "ecs", "ocsf"):
        lines = run(out, fmt, tmp_path, alerts)
        assert len(lines) == len(rows) + 3
        for line in lines:
            assert line.isascii() and "\n" not in line and "\r" not in line
            json.loads(line)
    hec = [json.loads(x) for x in run(out, "hec", tmp_path, alerts)]
    assert hec[0]["event"]["account_id"] == HOSTILE and hec[0]["event"]["source_accounts"] == [HOSTILE_UA]
    assert hec[len(rows)]["event"]["summary"] == HOSTILE_UA
    ecs = [json.loads(x) for x in run(out, "ecs", tmp_path, alerts)]
    assert ecs[0]["organization"]["id"] == HOSTILE and ecs[len(rows)]["labels"]["evidence_text"] == HOSTILE_UA
    ocsf = [json.loads(x) for x in run(out, "ocsf", tmp_path, alerts)]
    assert ocsf[0]["actor"]["user"]["account"]["uid"] == HOSTILE and ocsf[0]["device"]["hostname"] == "decode|0=\\\n"
    assert ocsf[0]["resources"] == [
        {"type": "KV cache", "uid": "req-x", "owner": {"account": {"uid": HOSTILE_UA}}, "hostname": "decode|0=\\\n"}
    ]
    assert ocsf[0]["unmapped"]["reason"] == HOSTILE_UA and ocsf[len(rows)]["message"] == HOSTILE_UA


def test_alert_formula_neutralized(tmp_path: Path, hostile_out: tuple[Path, Path]) -> None:
    """An alert string a spreadsheet would run (it starts with '=') gets the CSV outputs' apostrophe."""
    out, _ = hostile_out
    alerts = tmp_path / "formula.jsonl"
    a = json.loads(ALERTS.read_text().splitlines()[0])
    a["summary"] = '=HYPERLINK("http://x","y")'
    alerts.write_text(json.dumps(a) + "\n")
    doc = json.loads(run(out, "ecs", tmp_path, alerts)[-1])
    assert doc["message"] == "'" + a["summary"]


# ---- syslog: a local UDP server and a local TCP server ----


def test_syslog_udp(hostile_out: tuple[Path, Path], tmp_path: Path) -> None:
    out, alerts = hostile_out
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("127.0.0.1", 0))
    server.settimeout(30)  # a guard against a hang, not a timing assert
    port = server.getsockname()[1]
    counts = export(out, "cef", alerts, syslog=f"127.0.0.1:{port}")
    expected = run(out, "cef", tmp_path, alerts)
    got = [server.recvfrom(65535)[0] for _ in range(counts["finding"] + counts["alert"])]
    server.close()
    assert len(got) == len(expected) == 6
    for frame, line in zip(got, expected, strict=True):
        facility, severity, msg = parse_syslog(frame)
        assert facility == 4 and msg == line
        cef_sev = int(parse_cef(msg)[0][6])
        assert severity == (2 if cef_sev >= 9 else 3 if cef_sev >= 7 else 4 if cef_sev >= 4 else 5)


def test_syslog_tcp_octet_counting(hostile_out: tuple[Path, Path], tmp_path: Path) -> None:
    out, alerts = hostile_out
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(30)
    received = bytearray()

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            while chunk := conn.recv(65536):
                received.extend(chunk)

    t = threading.Thread(target=serve)
    t.start()
    export(out, "cef", alerts, syslog=f"tcp://127.0.0.1:{server.getsockname()[1]}")
    t.join(30)
    server.close()
    frames, data = [], bytes(received)
    while data:  # RFC 6587 3.4.1: MSG-LEN SP SYSLOG-MSG
        length, _, rest = data.partition(b" ")
        frames.append(rest[: int(length)])
        data = rest[int(length) :]
    assert [parse_syslog(f)[2] for f in frames] == run(out, "cef", tmp_path, alerts)


# ---- bad input: one line naming the file and the problem, no traceback ----


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "forensics", *args], capture_output=True, text=True, timeout=120, env={**os.environ}
    )


@pytest.mark.parametrize(
    ("setup", "args", "needle"),
    [
        (lambda d: None, ["--format", "cef"], "manifest.json: not found"),
        (lambda d: (d / "manifest.json").write_text("{"), ["--format", "cef"], "manifest.json: not readable JSON"),
        (
            lambda d: (d / "manifest.json").write_text('{"incident": {"id": "INC-1"}}'),
            ["--format", "cef"],
            "affected_responses.csv: not found",
        ),
        (lambda d: None, ["--format", "xml"], "--format 'xml'"),
        (lambda d: None, ["--format", "hec", "--syslog", "127.0.0.1:514"], "--syslog sends CEF"),
        (lambda d: None, ["--format", "cef", "--syslog", "nohost"], "expected HOST:PORT"),
    ],
)
def test_bad_input(tmp_path: Path, setup, args: list[str], needle: str) -> None:  # noqa: ANN001
    d = tmp_path / "out"
    d.mkdir()
    setup(d)
    p = cli("export-siem", str(d), *args)
    assert p.returncode == 2, p.stderr
    assert needle in p.stderr and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_bad_alerts_file(sample_out: Path, tmp_path: Path) -> None:
    bad = tmp_path / "alerts.jsonl"
    bad.write_text('{"kind": "exposure", "node": "d", "log_time": "2026-01-01T00:00:00Z"}\nnot json\n')
    p = cli("export-siem", str(sample_out), "--format", "ecs", "--alerts", str(bad), "--output", str(tmp_path / "x"))
    assert p.returncode == 2 and f"{bad}: line 2: not JSON" in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "x").exists()  # every input is checked before anything is written


@pytest.mark.parametrize(
    ("second", "reason"),
    [
        (b"\xff\xfe bad\n", "line 2: not UTF-8"),
        (b"[" * 100_000 + b"]" * 100_000 + b"\n", "line 2: not JSON (nested too deep)"),
    ],
)
def test_unreadable_alert_lines(sample_out: Path, tmp_path: Path, second: bytes, reason: str) -> None:
    bad = tmp_path / "alerts.jsonl"
    bad.write_bytes(b'{"kind": "exposure", "node": "d", "log_time": "2026-01-01T00:00:00Z"}\n' + second)
    p = cli("export-siem", str(sample_out), "--format", "cef", "--alerts", str(bad), "--output", str(tmp_path / "x"))
    assert p.returncode == 2 and f"{bad}: {reason}" in p.stderr and "Traceback" not in p.stderr


def test_from_the_database_when_the_csvs_are_gone(sample_out: Path, tmp_path: Path) -> None:
    """Without affected_responses.csv the events come from incident.duckdb's views, cell for cell the same."""
    out = tmp_path / "db-only"
    out.mkdir()
    for name in ("manifest.json", "incident.duckdb"):
        shutil.copy(sample_out / name, out / name)
    assert run(out, "hec", tmp_path) == run(sample_out, "hec", tmp_path)


def test_a_finding_without_a_time_takes_the_runs(hostile_out: tuple[Path, Path], tmp_path: Path) -> None:
    out, _ = hostile_out
    rows = read_csv(out / "affected_responses.csv")
    rows[0]["first_exposed_at"] = ""
    with (out / "affected_responses.csv").open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    finished = json.loads((out / "manifest.json").read_text())["run"]["finished_at"]
    doc = json.loads(run(out, "ecs", tmp_path)[0])
    assert doc["@timestamp"][:19] == finished[:19] and "first_exposed_at" not in doc["labels"]
