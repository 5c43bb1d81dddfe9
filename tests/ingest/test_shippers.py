"""Engine logs inside log shippers' exports (forensics.intake.shippers): each format recognised by its own
fields or line shape, read line by line with the shipper's time and labels; the two real lines that were not
understood; a simulated incident whose engine logs are exported in each format gives the same findings."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from forensics.engines.facts import EngineRows
from forensics.ingest.engine import parse_log
from forensics.ingest.shipped import parse_shipped
from forensics.intake import InputFile, discover
from forensics.intake.shippers import recognise, unwrap

DATA = Path(__file__).parent.parent / "data" / "shippers"
LINES = (DATA / "lines.txt").read_text(encoding="utf-8").splitlines()
T0 = datetime(2026, 5, 20, 8, 2, 44, 496000, tzinfo=UTC)
POD = {"pod": "sglang-prefill-0", "container": "sglang", "namespace": "inference"}
# fixture -> (format recognised, the labels its format carries)
FIXTURES = {
    "docker_json.sglang-prefill-0-json.log": ("docker_json", {"stream": "stdout"}),
    "cri.0.log": ("cri", {"stream": "stdout"}),
    "inference_sglang-prefill-0_sglang.log": ("kubectl", POD),
    "cloudwatch_json.events.json": ("cloudwatch_json", POD),
    "cloudwatch_text.events.txt": ("cloudwatch_text", {}),
    "cloudwatch_copy.copied.txt": ("cloudwatch_text", {}),
    "cloudwatch_csv.logs-insights-results.csv": ("cloudwatch_csv", POD),
    "loki.loki.json": ("loki", POD | {"host": "ip-10-0-1-17", "stream": "stdout"}),
    "logcli.logcli.jsonl": ("loki", POD),
    "datadog.datadog.json": ("datadog", POD | {"host": "ip-10-0-1-17"}),
    "elasticsearch.search.json": ("elasticsearch", POD | {"host": "ip-10-0-1-17", "stream": "stdout"}),
    "journald.journal.json": ("journald", {"host": "ip-10-0-1-17", "container": "sglang-prefill-0"}),
}


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_each_shipper_fixture_is_read_line_by_line(name: str) -> None:
    fmt, labels = FIXTURES[name]
    path = DATA / name
    assert recognise(path) == fmt
    got = list(unwrap(path, fmt))
    assert [s.raw.decode() for s in got] == LINES
    assert [s.line for s in got] == list(range(1, len(LINES) + 1))
    # CloudWatch and CSV keep milliseconds; the others the full time
    assert [s.shipped_at for s in got] == [T0 + timedelta(milliseconds=7 * i) for i in range(len(LINES))]
    for s in got:
        assert {k: v for k, v in s.labels.items() if k in labels} == labels, s.labels


def test_plain_engine_logs_are_no_shippers_export() -> None:
    sample = Path(__file__).parent.parent.parent / "sample_data" / "bundle" / "engine"
    files = sorted(p for p in sample.rglob("*") if p.is_file())
    assert files
    assert [recognise(p) for p in files] == [None] * len(files)
    assert recognise(DATA / "llmd_2433_prefill.log") is None  # pasted as printed: a plain log


def test_docker_partial_records_are_joined_as_the_driver_split_them(tmp_path: Path) -> None:
    long = "[2026-05-20 08:02:44] Finish: obj=GenerateReqInput(rid='x', text='" + "a" * 40000 + "')"
    recs = [long[i : i + 16384] for i in range(0, len(long), 16384)]
    recs[-1] += "\n"
    path = tmp_path / "c-json.log"
    path.write_text(
        "".join(json.dumps({"log": r, "stream": "stdout", "time": "2026-05-20T08:02:44.5Z"}) + "\n" for r in recs)
    )
    got = list(unwrap(path, recognise(path) or ""))
    assert [(s.line, s.record, s.raw.decode()) for s in got] == [(1, 1, long)]


def test_a_multi_line_event_yields_each_line(tmp_path: Path) -> None:
    # a traceback an agent shipped as one event (Datadog multi-line aggregation): its lines, in order
    event = "\n".join(LINES[3:])
    doc = {"data": [{"id": "a", "type": "log", "attributes": {"message": event, "timestamp": "2026-05-20T08:02:44.5Z",
                                                             "host": "h", "tags": ["pod_name:p"]}}]}  # fmt: skip
    path = tmp_path / "dd.json"
    path.write_text(json.dumps(doc))
    got = list(unwrap(path, "datadog"))
    assert [s.raw.decode() for s in got] == LINES[3:]
    assert {s.record for s in got} == {1} and [s.line for s in got] == list(range(1, len(LINES) - 2))


def _read(path: Path, node: str | None = "n0") -> EngineRows:
    rows = EngineRows()
    fmt = recognise(path)
    f = InputFile(1, "engine_log", path, path.name, node, format=fmt)
    if fmt:
        parse_shipped(f, ZoneInfo("UTC"), rows, [], ("pod", "host"), {"sglang-prefill-0": "prefill-0"})
    else:
        parse_log(f, ZoneInfo("UTC"), rows)
    return rows


def test_the_finish_line_inside_a_cloudwatch_copy_is_read() -> None:
    # sgl-project/sglang#25887: `<epoch ms>\t<ISO time>\t<line>`, the Finish line without an SGLang prefix
    rows = _read(DATA / "sglang_25887_cloudwatch.txt")
    assert rows.rejected == []
    assert [(r["kind"], r["rid"], r["room"], r["input_len"], r["output_len"], r["line"]) for r in rows.requests] == [
        ("finished", "bf890d9ca8ce4008bef7ef25d97f8fba", None, 32472, 23297, 2)
    ]
    assert len(rows.batches) == 2  # the Decode batch and Prefill batch lines around it
    # read as a plain log, the wrapper hid the message: the line was rejected
    plain = EngineRows()
    parse_log(InputFile(1, "engine_log", DATA / "sglang_25887_cloudwatch.txt", "x", "n0"), ZoneInfo("UTC"), plain)
    assert plain.requests == [] and any("Finish: obj=" in r[2] for r in plain.rejected)


def test_the_transfer_failure_after_a_traceback_is_read() -> None:
    # llm-d/llm-d#2433 (SGLang 0.5.16): no prefix, the rid alone, the exception's own text
    rows = _read(DATA / "llmd_2433_prefill.log")
    assert rows.rejected == []
    assert [(r["kind"], r["rid"], r["room"], r["detail"], r["line"]) for r in rows.requests] == [
        (
            "prefill_transfer_failed",
            "5b02aee35dae49aba98a333ce89964e6",
            None,
            "PD Disaggregation does NOT support PD different TP sizes for non-MLA SWA hybrid models yet.",
            8,
        )
    ]


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_every_shipper_gives_the_rows_of_the_plain_lines(tmp_path: Path, name: str) -> None:
    plain = tmp_path / "server.log"
    plain.write_text("\n".join(LINES) + "\n")
    want, got = _read(plain), _read(DATA / name)
    assert got.rejected == want.rejected == []
    assert got.requests == want.requests and got.batches == want.batches
    assert [(x["line"], x["kind"], x["message"]) for x in got.lines] == [
        (x["line"], x["kind"], x["message"]) for x in want.lines
    ]


def test_the_node_comes_from_the_labels_through_bundle_toml(tmp_path: Path) -> None:
    shipped: list[dict[str, object]] = []
    rows = EngineRows()
    f = InputFile(1, "engine_log", DATA / "loki.loki.json", "engine/loki.json", None, format="loki")
    parse_shipped(f, ZoneInfo("UTC"), rows, shipped, ("pod",), {"sglang-prefill-0": "prefill-0"})
    assert {r["node"] for r in rows.requests} == {"prefill-0"}
    assert {s["pod"] for s in shipped} == {"sglang-prefill-0"} and f.notes == [
        "nodes from the shipper's labels: prefill-0"
    ]
    # labels that name no node: every line rejected, saying why
    rows2 = EngineRows()
    f2 = InputFile(1, "engine_log", DATA / "cloudwatch_text.events.txt", "engine/e.txt", None, format="cloudwatch_text")
    parse_shipped(f2, ZoneInfo("UTC"), rows2, [], ("pod",), {})
    assert rows2.requests == [] and len(rows2.rejected) == len(LINES) and "no node" in rows2.rejected[0][2]


def test_discover_lists_exports_in_and_beside_node_folders(tmp_path: Path) -> None:
    (tmp_path / "engine" / "prefill-0").mkdir(parents=True)
    (tmp_path / "engine" / "prefill-0" / "c-json.log").write_bytes(
        (DATA / "docker_json.sglang-prefill-0-json.log").read_bytes()
    )
    (tmp_path / "engine" / "export.json").write_bytes((DATA / "datadog.datadog.json").read_bytes())
    (tmp_path / "engine" / "prefill-0" / "server.log").write_text("[2026-05-20 08:02:44] hello\n")
    got = [(f.rel, f.source, f.node, f.format) for f in discover(tmp_path)]
    assert got == [
        ("engine/export.json", "engine_log", None, "datadog"),
        ("engine/prefill-0/c-json.log", "engine_log", "prefill-0", "docker_json"),
        ("engine/prefill-0/server.log", "engine_log", "prefill-0", None),
    ]
