"""export-siem's four formats held to their published references, on the sample and on two simulated
incidents (one with a decode node without page telemetry, so indeterminate and signature findings too):

- OCSF: the JSON Schema (draft 2020-12) that ocsf-json-schema generates for class 2006 from the OCSF 1.8.0
  schema export it ships (schema.ocsf.io's export of release 1.8.0), checked by jsonschema; then the
  captions beside each enum id, from the same export.
- ECS: every field, its type, its array form and the allowed values of the categorization fields from
  elastic/ecs generated/ecs/ecs_flat.yml at v9.4.0 (tests/data/siem/ecs_flat-9.4.0.json, README there).
- CEF: the header fields' sizes and the extension dictionary's keys, types and lengths of the CEF
  Implementation Standard (tests/data/siem/cef_dictionary.json), on the lines the independent parser
  of test_siem.py reads.
- HEC: the metadata keys and types of Splunk's "Format events for HTTP Event Collector".

Each validator is shown to reject a broken event, and the OCSF events' values are checked against the
CSVs (read here) and, on the simulated incidents, against the simulator's truth."""

from __future__ import annotations

import copy
import csv
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from forensics.siem import export
from tests.siem.test_siem import ALERTS, RFC3339, labelled, ms, parse_cef
from tests.support import TESTS

DATA = TESTS / "data" / "siem"
OCSF_VERSION, ECS_VERSION = "1.8.0", "9.4.0"
SIMS = {
    "sim-pages": {"seed": 5, "requests": 120},
    "sim-dark": {"seed": 6, "requests": 120, "no_telemetry": "decode-1"},
}


# two incidents simulated and investigated for the module: make check leaves these tests out
SIMULATED = pytest.mark.slow


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def incidents(sample_out: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path | None]]:
    """name -> (investigate's output folder, the simulator's truth folder or None for the sample)."""
    from forensics.pipeline import investigate
    from forensics.simulate import build_config, simulate

    root = tmp_path_factory.mktemp("siem-incidents")
    found: dict[str, tuple[Path, Path | None]] = {"sample": (sample_out, None)}
    for name, cfg in SIMS.items():
        simulate(root / name, build_config("default", **cfg))
        investigate(root / name / "bundle", root / name / "out")
        found[name] = (root / name / "out", root / name / "truth")
    return found


def exported(out: Path, fmt: str, tmp: Path, alerts: Path | None) -> list[str]:
    dest = tmp / f"{out.parent.name}-{out.name}.{fmt}"
    export(out, fmt, alerts, dest)
    return dest.read_text(encoding="utf-8").splitlines()


def each_incident(incidents: dict[str, tuple[Path, Path | None]]) -> list[tuple[str, Path, Path | None]]:
    """(name, output folder, alerts file): the sample's alerts go with the sample only."""
    return [(name, out, ALERTS if truth is None else None) for name, (out, truth) in incidents.items()]


# ---- OCSF 1.8.0, class 2006 ----


@pytest.fixture(scope="module")
def ocsf() -> tuple[dict[str, Any], Any]:
    """The release's schema export (for the captions) and a validator of class 2006 without profiles."""
    from jsonschema import Draft202012Validator
    from ocsf_json_schema import OcsfJsonSchemaEmbedded, get_ocsf_schema

    raw = get_ocsf_schema(version=OCSF_VERSION)
    assert raw["version"] == OCSF_VERSION
    gen = OcsfJsonSchemaEmbedded(raw)
    name = gen.lookup_class_name_from_uid(class_uid=2006)
    assert name == "data_security_finding"
    schema = gen.get_class_schema(class_name=name, profiles=[])
    Draft202012Validator.check_schema(schema)
    return raw, Draft202012Validator(schema)


def ocsf_errors(validator: Any, doc: dict[str, Any]) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


def caption(attrs: dict[str, Any], key: str, value: int) -> str:
    return attrs[key]["enum"][str(value)]["caption"]


def check_ocsf_captions(raw: dict[str, Any], doc: dict[str, Any]) -> None:
    """Every *_id written with its caption: the captions are the release's (the JSON Schema checks ids only)."""
    cls = raw["classes"]["data_security_finding"]
    attrs, objs = cls["attributes"], raw["objects"]
    assert doc["class_name"] == cls["caption"] and doc["category_name"] == "Findings"
    assert raw["categories"]["attributes"]["findings"]["uid"] == doc["category_uid"]
    assert doc["type_uid"] == doc["class_uid"] * 100 + doc["activity_id"]
    assert doc["type_name"] == caption(attrs, "type_uid", doc["type_uid"])
    assert doc["activity_name"] == caption(attrs, "activity_id", doc["activity_id"])
    assert doc["severity"] == caption(attrs, "severity_id", doc["severity_id"])
    assert doc["status"] == caption(attrs, "status_id", doc["status_id"])
    if doc["confidence_id"] != 99:  # Other: the source's own word ("see the confidence attribute")
        assert doc["confidence"] == caption(attrs, "confidence_id", doc["confidence_id"])
    if "device" in doc:
        assert doc["device"]["type"] == caption(objs["device"]["attributes"], "type_id", doc["device"]["type_id"])
    analytic = doc["finding_info"]["analytic"]
    assert analytic["type"] == caption(objs["analytic"]["attributes"], "type_id", analytic["type_id"])
    for o in doc.get("observables", []):
        assert o["type"] == caption(objs["observable"]["attributes"], "type_id", o["type_id"])
        path, value = o["name"].split("."), [doc]
        for part in path:  # the observable's name is the path of an attribute holding its value
            value = [x for v in value for x in (v if isinstance(v, list) else [v])]
            value = [v[part] for v in value if part in v]
        assert o["value"] in value, o


@SIMULATED
def test_ocsf_validates_on_the_sample_and_two_simulated_incidents(
    incidents: dict[str, tuple[Path, Path | None]], ocsf: tuple[dict[str, Any], Any], tmp_path: Path
) -> None:
    raw, validator = ocsf
    for name, out, alerts in each_incident(incidents):
        rows = read_csv(out / "affected_responses.csv")
        docs = [json.loads(x) for x in exported(out, "ocsf", tmp_path, alerts)]
        n_alerts = len(ALERTS.read_text().splitlines()) if alerts else 0
        assert len(docs) == len(rows) + n_alerts and rows, name
        for doc in docs:
            assert not ocsf_errors(validator, doc), (name, ocsf_errors(validator, doc)[:5])
            assert doc["class_uid"] == 2006 and doc["metadata"]["version"] == OCSF_VERSION
            check_ocsf_captions(raw, doc)


@SIMULATED
def test_ocsf_values_are_the_findings_and_the_truths(
    incidents: dict[str, tuple[Path, Path | None]], tmp_path: Path
) -> None:
    """Each finding event says what its CSV row and exposures.csv say; on the simulated incidents, every
    source it names is a true source and every confirmed recipient was truly exposed."""
    statuses: set[str] = set()
    for name, (out, truth) in incidents.items():
        rows = read_csv(out / "affected_responses.csv")
        pairs: dict[str, set[tuple[str, str]]] = {}
        for e in read_csv(out / "exposures.csv"):
            if e["source_account_id"]:
                pairs.setdefault(e["recipient_request_id"], set()).add((e["source_request_id"], e["source_account_id"]))
        incident = json.loads((out / "manifest.json").read_text())["incident"]["id"]
        docs = [json.loads(x) for x in exported(out, "ocsf", tmp_path, None)]
        assert len(docs) == len(rows)
        for row, doc in zip(rows, docs, strict=True):
            statuses.add(row["status"])
            info = doc["finding_info"]
            assert info["uid"] == doc["metadata"]["uid"] == f"{incident}:{row['request_id']}"
            assert doc["metadata"]["correlation_uid"] == incident
            assert doc["actor"]["user"]["account"]["uid"] == row["account_id"]
            assert doc["device"]["hostname"] == row["decode_node"]
            if row["first_exposed_at"]:
                assert doc["time"] == ms(row["first_exposed_at"]) == info["first_seen_time"]
            else:  # the time is the run's, not a sighting
                assert "first_seen_time" not in info
            assert doc["status_code"] == row["status"]
            want = {"confirmed": (3, "High"), "indeterminate": (99, "Indeterminate")}[row["status"]]
            assert (doc["confidence_id"], doc["confidence"]) == want
            # an indeterminate response is not said to have attended another's KV: the evidence decides neither way
            assert ("may have attended" in doc["message"]) == (row["status"] == "indeterminate")
            assert info["data_sources"] == [
                {"pages": "page events", "signature": "engine logs (the placeholder signature)"}[row["evidence"]]
            ]
            got = {(r["uid"], r["owner"]["account"]["uid"]) for r in doc.get("resources", [])}
            assert got == pairs.get(row["request_id"], set()), row["request_id"]
            assert all(r["hostname"] == row["decode_node"] for r in doc.get("resources", []))
            for col, cell in row.items():
                value = doc["unmapped"][col]
                assert ("" if value is None else str(value)) == cell, col
        if truth is None:
            continue
        true_pairs = {(t["recipient_request_id"], t["source_request_id"]) for t in read_csv(truth / "exposures.csv")}
        exposed = {t["request_id"] for t in read_csv(truth / "responses.csv") if t["exposed"] == "1"}
        for row, doc in zip(rows, docs, strict=True):
            for r in doc.get("resources", []):
                assert (row["request_id"], r["uid"]) in true_pairs, (name, row["request_id"], r["uid"])
            if doc["confidence_id"] == 3:
                assert row["request_id"] in exposed, (name, row["request_id"])
    assert statuses == {"confirmed", "indeterminate"}, "the incidents must show both statuses"


def test_the_ocsf_validator_rejects_a_broken_event(
    sample_out: Path, ocsf: tuple[dict[str, Any], Any], tmp_path: Path
) -> None:
    _, validator = ocsf
    good = json.loads(exported(sample_out, "ocsf", tmp_path, None)[0])
    assert not ocsf_errors(validator, good)
    breaks: list[Callable[[dict[str, Any]], object]] = [
        lambda d: d["finding_info"].pop("uid"),
        lambda d: d["metadata"].pop("product"),
        lambda d: d.update(severity_id=7),
        lambda d: d.update(time="2026-09-02T10:17:53Z"),
        lambda d: d["actor"]["user"].update(account_id="x"),
        lambda d: d.update(type_uid=200605),
    ]
    for brk in breaks:
        doc = copy.deepcopy(good)
        brk(doc)
        assert ocsf_errors(validator, doc), doc


# ---- ECS 9.4.0, against ecs_flat.yml ----

ECS_TYPES: dict[str, Callable[[Any], bool]] = {
    "keyword": lambda v: isinstance(v, str),
    "constant_keyword": lambda v: isinstance(v, str),
    "wildcard": lambda v: isinstance(v, str),
    "match_only_text": lambda v: isinstance(v, str),
    "ip": lambda v: isinstance(v, str),
    "date": lambda v: isinstance(v, str) and bool(RFC3339.match(v)),
    "long": lambda v: isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v < 2**63,
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool) and -(2**31) <= v < 2**31,
    "float": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "double": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
}


@pytest.fixture(scope="module")
def ecs_fields() -> dict[str, dict[str, Any]]:
    fields: dict[str, dict[str, Any]] = json.loads((DATA / f"ecs_flat-{ECS_VERSION}.json").read_text())["fields"]
    return fields


def ecs_errors(fields: dict[str, dict[str, Any]], doc: dict[str, Any]) -> list[str]:
    """The document's fields against ecs_flat.yml: each a defined field of its type (an array where ECS
    normalizes it to one, a scalar elsewhere), an object field holding values of its object_type, the
    categorization fields within their allowed values and each category's expected event types, the
    required fields there, ecs.version the release's."""
    errs: list[str] = []

    def typed(name: str, kind: str, value: Any) -> None:
        check = ECS_TYPES.get(kind)
        if check is None:
            errs.append(f"{name}: ECS type {kind} is not one this export writes")
        elif not check(value):
            errs.append(f"{name}: {value!r} is not {kind}")

    def walk(prefix: str, obj: dict[str, Any]) -> None:
        for key, value in obj.items():
            name = f"{prefix}{key}"
            field = fields.get(name)
            if field is None:
                if isinstance(value, dict):
                    walk(name + ".", value)
                else:
                    errs.append(f"{name}: not an ECS {ECS_VERSION} field")
                continue
            if field["type"] == "object":
                if not isinstance(value, dict):
                    errs.append(f"{name}: an object field holds {value!r}")
                    continue
                for k, v in value.items():
                    if isinstance(v, dict | list):
                        errs.append(f"{name}.{k}: an object field's values are {field['object_type']}, not nested")
                    else:
                        typed(f"{name}.{k}", field["object_type"], v)
                continue
            values = value if isinstance(value, list) else [value]
            if ("array" in field.get("normalize", [])) != isinstance(value, list):
                errs.append(f"{name}: {'an array' if isinstance(value, list) else 'a scalar'} against ECS' normalize")
            for v in values:
                typed(name, field["type"], v)
                allowed = field.get("allowed_values")
                if allowed is not None and v not in allowed:
                    errs.append(f"{name}: {v!r} is not an allowed value")

    walk("", doc)
    flat = set()

    def names(prefix: str, obj: dict[str, Any]) -> None:
        for k, v in obj.items():
            flat.add(prefix + k)
            if isinstance(v, dict):
                names(prefix + k + ".", v)

    names("", doc)
    errs += [f"{n}: required" for n, f in fields.items() if f.get("required") and n not in flat]
    event = doc.get("event", {})
    for cat in event.get("category", []):
        expected = fields["event.category"]["allowed_values"].get(cat) or []
        bad = [t for t in event.get("type", []) if t not in expected]
        if bad:
            errs.append(f"event.type {bad} not among {cat}'s expected event types {expected}")
    if doc.get("ecs", {}).get("version") != ECS_VERSION:
        errs.append(f"ecs.version is not {ECS_VERSION}")
    return errs


@SIMULATED
def test_ecs_against_ecs_flat(
    incidents: dict[str, tuple[Path, Path | None]], ecs_fields: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    for name, out, alerts in each_incident(incidents):
        docs = [json.loads(x) for x in exported(out, "ecs", tmp_path, alerts)]
        assert docs
        for doc in docs:
            assert not ecs_errors(ecs_fields, doc), (name, ecs_errors(ecs_fields, doc))
            assert doc["event"]["kind"] != "signal"  # reserved for the Elastic Security app's own rules


def test_the_ecs_check_rejects_a_broken_document(
    sample_out: Path, ecs_fields: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    good = json.loads(exported(sample_out, "ecs", tmp_path, None)[0])
    assert not ecs_errors(ecs_fields, good)
    breaks: list[Callable[[dict[str, Any]], object]] = [
        lambda d: d["event"].update(category=["leak"]),
        lambda d: d["event"].update(type=["creation"]),  # not an intrusion_detection type
        lambda d: d["event"].update(category="intrusion_detection"),  # ECS: an array
        lambda d: d["event"].update(severity="9"),
        lambda d: d["labels"].update(nested={"a": "b"}),
        lambda d: d.update(kv_room="1"),
        lambda d: d.pop("@timestamp"),
        lambda d: d["ecs"].update(version="8.0.0"),
    ]
    for brk in breaks:
        doc = copy.deepcopy(good)
        brk(doc)
        assert ecs_errors(ecs_fields, doc), doc


# ---- CEF, against the standard's header sizes and extension dictionary ----


@pytest.fixture(scope="module")
def cef_dictionary() -> dict[str, Any]:
    table: dict[str, Any] = json.loads((DATA / "cef_dictionary.json").read_text())
    return table


def cef_errors(table: dict[str, Any], line: str) -> list[str]:
    """A line the independent parser reads: version 0, the header fields within their sizes, the severity
    an integer 0-10; each extension key the dictionary's and one a producer sets (consumer keys are
    ArcSight's own), its value of the key's type and within its length, each custom field with its label."""
    head, ext = parse_cef(line)
    errs: list[str] = []
    if head[0] != "0":
        errs.append(f"CEF version {head[0]!r}")
    for field, value in zip(
        ("deviceVendor", "deviceProduct", "deviceVersion", "deviceEventClassId", "name"), head[1:6], strict=True
    ):
        if not value or len(value) > table["header"][field]:
            errs.append(f"header {field}: {len(value)} characters, at most {table['header'][field]}")
    if not (head[6].isdigit() and 0 <= int(head[6]) <= 10):
        errs.append(f"severity {head[6]!r} is not 0-10")
    keys = table["extensions"]
    for key, value in ext.items():
        spec = keys.get(key)
        if spec is None:
            errs.append(f"{key}: not in the extension dictionary")
            continue
        if spec["audience"] == "consumer":
            errs.append(f"{key}: set by ArcSight, not by a producer")
        kind = spec["type"]
        if kind in ("long", "integer"):
            bits = 63 if kind == "long" else 31
            if not re.fullmatch(r"-?\d+", value) or not -(2**bits) <= int(value) < 2**bits:
                errs.append(f"{key}: {value!r} is not a {kind}")
        elif kind == "timestamp":
            if not re.fullmatch(r"\d{10,13}", value):  # appendix A: milliseconds since the epoch
                errs.append(f"{key}: {value!r} is not milliseconds since the epoch")
        elif kind == "string":
            if len(value) > spec["length"]:
                errs.append(f"{key}: {len(value)} characters, at most {spec['length']}")
        else:
            errs.append(f"{key}: type {kind} is not one this export writes")
        if re.fullmatch(r"c[sn]\d", key) and f"{key}Label" not in ext:
            errs.append(f"{key}: without {key}Label")
    return errs


@SIMULATED
def test_cef_against_the_extension_dictionary(
    incidents: dict[str, tuple[Path, Path | None]], cef_dictionary: dict[str, Any], tmp_path: Path
) -> None:
    for name, out, alerts in each_incident(incidents):
        lines = exported(out, "cef", tmp_path, alerts)
        assert lines
        for line in lines:
            assert not cef_errors(cef_dictionary, line), (name, cef_errors(cef_dictionary, line))
            assert labelled(parse_cef(line)[1])["incident"]


def test_the_cef_check_rejects_a_broken_line(sample_out: Path, cef_dictionary: dict[str, Any], tmp_path: Path) -> None:
    good = exported(sample_out, "cef", tmp_path, None)[0]
    assert not cef_errors(cef_dictionary, good)
    for broken in (
        good.replace("CEF:0|", "CEF:7|", 1),
        good + " agentSeverity=9",  # a consumer key
        good + " kvRoom=1",  # not in the dictionary
        good.replace("|rt=", "|rt=x", 1),
        good + " act=" + "x" * 64,  # deviceAction: 63 characters
        re.sub(r"externalId=\S+", "externalId=" + "x" * 41, good),
        re.sub(r"cn1=\S+", "cn1=4.5", good),
        re.sub(r" cs1Label=\S+", "", good),
    ):
        assert cef_errors(cef_dictionary, broken), broken[-80:]


# ---- Splunk HEC, the event endpoint's metadata ----

HEC_META = {"time", "host", "source", "sourcetype", "index", "fields", "event"}


def hec_errors(doc: dict[str, Any]) -> list[str]:
    """Format events for HTTP Event Collector: the metadata keys only; time epoch seconds (<sec>.<ms>);
    host, source, sourcetype and index strings; event required and not empty; fields a flat object."""
    errs = [f"{k}: not an event metadata key" for k in doc if k not in HEC_META]
    t = doc.get("time")
    if t is not None and (isinstance(t, bool) or not isinstance(t, int | float) or t < 0 or round(t, 3) != t):
        errs.append(f"time {t!r} is not epoch seconds with at most milliseconds")
    errs += [
        f"{k}: not a string"
        for k in ("host", "source", "sourcetype", "index")
        if k in doc and not isinstance(doc[k], str)
    ]
    if not doc.get("event") or not isinstance(doc["event"], dict | str):
        errs.append("event: missing or empty")
    if "fields" in doc and any(isinstance(v, dict) for v in doc["fields"].values()):
        errs.append("fields: not flat")
    return errs


@SIMULATED
def test_hec_against_the_event_endpoint(incidents: dict[str, tuple[Path, Path | None]], tmp_path: Path) -> None:
    for name, out, alerts in each_incident(incidents):
        docs = [json.loads(x) for x in exported(out, "hec", tmp_path, alerts)]
        assert docs
        for doc in docs:
            assert not hec_errors(doc), (name, hec_errors(doc))


def test_the_hec_check_rejects_a_broken_event(sample_out: Path, tmp_path: Path) -> None:
    good = json.loads(exported(sample_out, "hec", tmp_path, None)[0])
    assert not hec_errors(good)
    breaks: list[Callable[[dict[str, Any]], object]] = [
        lambda d: d.update(severity=9),
        lambda d: d.update(time="2026-09-02T10:17:53Z"),
        lambda d: d.update(time=1.0005),
        lambda d: d.pop("event"),
        lambda d: d.update(host=7),
        lambda d: d.update(fields={"a": {"b": 1}}),
    ]
    for brk in breaks:
        doc = copy.deepcopy(good)
        brk(doc)
        assert hec_errors(doc), doc


def test_ocsf_from_the_database_when_the_csvs_are_gone(sample_out: Path, tmp_path: Path) -> None:
    """Without the CSVs the OCSF events, their sources too, come from incident.duckdb's views, the same."""
    out = tmp_path / "db-only"
    out.mkdir()
    for name in ("manifest.json", "incident.duckdb"):
        shutil.copy(sample_out / name, out / name)
    assert exported(out, "ocsf", tmp_path, None) == exported(sample_out, "ocsf", tmp_path, None)


def test_hostile_values_stay_within_each_reference(
    hostile_out: tuple[Path, Path],
    ocsf: tuple[dict[str, Any], Any],
    ecs_fields: dict[str, dict[str, Any]],
    cef_dictionary: dict[str, Any],
    tmp_path: Path,
) -> None:
    """Pipes, equals signs, backslashes, quotes, line breaks and formulas in every cell leave each format
    valid: escaped or held as strings, never a new field, line or header."""
    out, alerts = hostile_out
    raw, validator = ocsf
    for doc in map(json.loads, exported(out, "ocsf", tmp_path, alerts)):
        assert not ocsf_errors(validator, doc), ocsf_errors(validator, doc)
        check_ocsf_captions(raw, doc)
    for doc in map(json.loads, exported(out, "ecs", tmp_path, alerts)):
        assert not ecs_errors(ecs_fields, doc), ecs_errors(ecs_fields, doc)
    for doc in map(json.loads, exported(out, "hec", tmp_path, alerts)):
        assert not hec_errors(doc), hec_errors(doc)
    for line in exported(out, "cef", tmp_path, alerts):
        assert not cef_errors(cef_dictionary, line), cef_errors(cef_dictionary, line)


def test_cef_values_longer_than_the_dictionary_allows_are_fitted(cef_dictionary: dict[str, Any]) -> None:
    """A large incident's finding (hundreds of source accounts, a long request id and reason) stays within
    every key's length: the accounts cut at a whole name with the number left out, the rest cut with
    "..."; a value within its length is written whole."""
    from datetime import UTC, datetime

    from forensics.siem import cef
    from forensics.siem.model import Event

    accounts = [f"acct-{i:05d}-{'x' * (i % 7)}" for i in range(400)]
    row = {
        "request_id": "req-" + "9" * 80,
        "account_id": "victim",
        "source_accounts": ";".join(accounts),
        "cohort": "customer",
        "status": "confirmed",
        "evidence": "pages",
        "source_requests": "400",
        "reason": "r" * 5000,
    }
    ev = Event("finding", "kv-exposure", "KV exposure", 8, datetime(2026, 9, 1, tzinfo=UTC), "e1", "m" * 2000,
               "decode-0", "INC-1", row)  # fmt: skip
    line = cef.render(ev)
    assert not cef_errors(cef_dictionary, line), cef_errors(cef_dictionary, line)
    ext = parse_cef(line)[1]
    kept, more = re.fullmatch(r"(.*) \(\+(\d+) more\)", ext["suser"]).groups()  # type: ignore[union-attr]
    assert kept.split(";") == accounts[: len(kept.split(";"))] and len(kept.split(";")) + int(more) == 400
    assert ext["externalId"] == row["request_id"][:37] + "..." and ext["duser"] == "victim"
    assert len(ext["reason"]) == 1023 and ext["reason"].endswith("...")
