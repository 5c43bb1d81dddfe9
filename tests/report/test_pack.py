"""Issue #51, time to file: `forensics pack OUT` builds the whole compliance pack (the Art. 33 form, the
notices, California's form for the accounts mapped there, the evidence index, the four SIEM exports) in
one folder swapped in whole, and the manifest's chain and signature cover it. Every notice line cites the
findings rows behind it; the test walks from a notice's ids to the rows of the findings CSVs and on to
the evidence lines in the bundle, checking each against the CSVs read here, never against the pack."""

from __future__ import annotations

import csv
import functools
import hashlib
import json
import re
import shutil
from collections import defaultdict
from pathlib import Path

import duckdb
import pytest

from forensics.citations import FINDING_ID
from forensics.custody import keygen, sign, signing_key
from forensics.custody.checks import verify
from forensics.errors import InputError
from forensics.pack import PACK, SIEM_FILES, build_pack
from forensics.siem import export
from tests.support import SAMPLE


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def packed(sample_out: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A copy of the sample's output, packed with a key, its accounts mapped by a bundle.toml of the
    operator's beside it: every other notified account to US-CA."""
    tmp = tmp_path_factory.mktemp("pack")
    out = tmp / "out"
    shutil.copytree(sample_out, out)
    notified = [r["account_id"] for r in _csv(out / "notifications.csv")]
    ca = sorted(notified)[::2]
    operator = tmp / "operator"
    operator.mkdir()
    (operator / "bundle.toml").write_text(
        (SAMPLE / "bundle.toml").read_text() + '\n[disclosure]\naccounts_file = "accounts.csv"\n'
    )
    with (operator / "accounts.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["account_id", "jurisdiction", "residents"])
        w.writerows([a, "US-CA", 1] for a in ca)
    private, public = keygen(tmp / "dpo")
    p = build_pack(out, bundle=operator, key=signing_key(private))
    return {"out": out, "ca": ca, "notified": notified, "public": public, "private": private, "packed": p}


def test_the_pack_holds_every_part(packed: dict, tmp_path: Path) -> None:
    out, pack = packed["out"], packed["out"] / PACK
    for name in ("edpb_art33.html", "edpb_art33.md"):  # the form as investigate rendered it
        assert (pack / "forms" / name).read_bytes() == (out / name).read_bytes()
    notified = packed["notified"]
    merge = _csv(pack / "notices" / "mail_merge.csv")
    assert [r["account_id"] for r in merge] == notified
    for r in merge:
        assert all((pack / "notices" / f).is_file() for f in r["notice_files"].split(";"))
    ca = _csv(pack / "notices" / "US-CA" / "mail_merge.csv")
    assert [r["account_id"] for r in ca] == packed["ca"]
    for r in ca:
        text = (pack / "notices" / "US-CA" / r["notice_files"]).read_text()
        assert "<h1>Notice of Data Breach</h1>" in text and "What Information Was Involved" in text
    affected = _csv(out / "affected_responses.csv")
    for fmt, name in SIEM_FILES.items():  # export-siem's events (tests/siem/test_schemas.py validates them)
        lines = (pack / "siem" / name).read_text().splitlines()
        assert len(lines) == len(affected), fmt
        export(out, fmt, None, tmp_path / name)
        assert (tmp_path / name).read_bytes() == (pack / "siem" / name).read_bytes(), fmt
    assert packed["packed"].siem == {"finding": len(affected), "alert": 0}


def test_verify_covers_the_pack_and_names_a_changed_file(packed: dict) -> None:
    out = packed["out"]
    v = verify(out, trusted_key=packed["public"])
    assert v.ok, v.failures
    manifest = json.loads((out / "manifest.json").read_text())
    listed = {k for k in manifest["run"]["outputs_sha256"] if k.startswith(f"{PACK}/")}
    assert listed == {p.relative_to(out).as_posix() for p in (out / PACK).rglob("*") if p.is_file()}
    assert manifest["run"]["previous_manifest"]["path"].startswith("custody/")  # the run before the pack
    victim = out / PACK / "siem" / SIEM_FILES["ocsf"]
    kept = victim.read_bytes()
    try:
        victim.write_bytes(kept[:-2] + b" \n")
        assert verify(out).failures == [f"{victim}: changed (SHA-256 differs from the manifest's)"]
    finally:
        victim.write_bytes(kept)


def _rehashed(out: Path, changed: Path, private: Path) -> None:
    """The manifest made to claim `changed`'s new bytes and signed again: only the walk can catch it."""
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["run"]["outputs_sha256"][changed.relative_to(out).as_posix()] = hashlib.sha256(
        changed.read_bytes()
    ).hexdigest()
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    sign(out, signing_key(private))


def test_verify_walks_every_cited_id_to_its_evidence_lines(packed: dict, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shutil.copytree(packed["out"], out)  # copies: the pack's notices no longer share investigate's bytes
    v = verify(out, trusted_key=packed["public"])
    assert v.ok, v.failures
    assert v.checked["citations"] > 100
    index = {r["finding_id"]: r for r in _csv(out / PACK / "evidence.csv")}
    # one id of a California notice altered (a digit of its hex), the manifest hashed and signed over it
    victim = next(
        p for p in sorted((out / PACK / "notices" / "US-CA").glob("*.html")) if FINDING_ID.search(p.read_text())
    )
    text = victim.read_text()
    cited = FINDING_ID.search(text).group(0)  # type: ignore[union-attr]
    altered = cited[:-1] + ("0" if cited[-1] != "0" else "1")
    assert cited in index and altered not in index
    victim.write_text(text.replace(cited, altered, 1))
    _rehashed(out, victim, packed["private"])
    v = verify(out, trusted_key=packed["public"])
    assert v.failures == [f"{victim}: cites finding {altered}, which pack/evidence.csv does not hold"]
    victim.write_text(text)
    _rehashed(out, victim, packed["private"])
    assert verify(out).ok
    # an evidence line moved past the end of its file: every notice citing that finding fails, by name
    evidence = out / PACK / "evidence.csv"
    kept = evidence.read_text()
    ref = index[cited]["evidence_refs"].split(";")[0]
    path, _, line = ref.rpartition(":")
    assert sum(1 for _ in (SAMPLE / path).open("rb")) >= int(line)  # the line exists in the bundle
    evidence.write_text(kept.replace(f"{ref}", f"{path}:99999999", 1))
    _rehashed(out, evidence, packed["private"])
    failures = verify(out).failures
    assert failures and all(
        f"cites finding {cited}, whose evidence line {path}:99999999 is past" in f for f in failures
    )
    assert any(f.startswith(f"{victim}: ") for f in failures)


@functools.cache
def _parquet_rows(path: Path) -> list[dict]:
    """A Parquet file's rows in order (row n of a finding's evidence is the n-th, from 1)."""
    con = duckdb.connect()
    try:
        cur = con.execute(
            "SELECT * EXCLUDE (file_row_number) FROM read_parquet(?, file_row_number = true) ORDER BY file_row_number",
            [str(path)],
        )
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
    finally:
        con.close()


@functools.cache
def _lines(path: Path) -> list[str]:
    import gzip

    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", newline="") as f:  # type: ignore[operator]
        return list(f)


def _evidence_names(ref: str, key: dict) -> bool:
    """Whether the bundle's line `ref` (file:line) is about the finding: its room (or, for a response, the
    room of a source whose KV it attended), or one of its requests."""
    name, _, n = ref.rpartition(":")
    path = SAMPLE / name
    rooms = {key[c] for c in ("room", "recipient_room", "source_room") if key.get(c)} | set(key.get("writers", ()))
    ids = {key[c] for c in ("request_id", "recipient_request_id", "source_request_id") if key.get(c)}
    if path.suffix == ".parquet":
        row = _parquet_rows(path)[int(n) - 1]
        values = {str(v) for v in row.values() if v is not None}
        return bool(values & (rooms | ids))
    text = _lines(path)[int(n) - 1]
    return any(x in text for x in rooms | ids)


def test_a_notice_line_walks_to_its_findings_rows_and_evidence_lines(packed: dict) -> None:
    out, pack = packed["out"], packed["out"] / PACK
    affected = _csv(out / "affected_responses.csv")
    exposures = _csv(out / "exposures.csv")
    by_source: dict[str, list[dict[str, str]]] = defaultdict(list)
    writers: dict[str, set[str]] = defaultdict(set)  # a response's page evidence: its sources' writes too
    for e in exposures:
        by_source[e["source_request_id"]].append(e)
        writers[e["recipient_request_id"]].add(e["source_room"])
    index = {r["finding_id"]: r for r in _csv(pack / "evidence.csv")}
    assert len(index) == len(affected) + len(exposures)  # one id per findings row, none shared
    listed = _csv(pack / "notices" / "requests.csv")
    walked = 0
    for r in _csv(pack / "notices" / "mail_merge.csv"):
        text = (pack / "notices" / r["notice_files"].split(";")[-1]).read_text()  # the .txt
        part = text.partition("Evidence references")[2]
        cites = {(rid, role): ids for rid, role, ids in re.findall(r"^  (\S+) \((\w+)\): (.+)$", part, re.M)}
        mine = [x for x in listed if x["account_id"] == r["account_id"] and x["role"] != "possibly_exposed"]
        assert {(x["request_id"], x["role"]) for x in mine} == set(cites)  # every listed line cites, only those
        for x in mine:
            rows = [index[i] for i in cites[(x["request_id"], x["role"])].split()]
            if x["role"] == "received":
                behind = [a for a in affected if a["request_id"] == x["request_id"]]
                ours = [row for row in rows if row["finding_file"] == "affected_responses.csv"]
                assert [row["request_id"] for row in ours] == [a["request_id"] for a in behind]
                findings = [dict(a, writers=writers[a["request_id"]]) for a in behind]
            else:
                behind = by_source[x["request_id"]]
                ours = [row for row in rows if row["finding_file"] == "exposures.csv"]
                got = sorted((row["request_id"], row["node"], row["kind"]) for row in ours)
                assert got == sorted((e["recipient_request_id"], e["node"], e["kind"]) for e in behind)
                findings = [
                    next(e for e in behind if (e["recipient_request_id"], e["node"], e["kind"]) == k[:3])
                    for k in ((row["request_id"], row["node"], row["kind"]) for row in ours)
                ]
            for row, finding in zip(ours, findings, strict=True):
                refs = row["evidence_refs"].split(";")
                assert refs and int(row["evidence_count"]) >= len(refs)
                assert all(_evidence_names(ref, finding) for ref in refs), (row["finding_id"], refs)
                walked += 1
    assert walked > 100


def test_a_failing_pack_leaves_the_previous_one_as_it_was(packed: dict, tmp_path: Path, monkeypatch) -> None:
    from forensics import pack as pack_mod

    out = tmp_path / "out"
    shutil.copytree(packed["out"], out)
    before = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def broken(*_: object) -> dict[str, int]:
        raise RuntimeError("the disk is full")

    monkeypatch.setattr(pack_mod, "_write_siem", broken)
    with pytest.raises(RuntimeError):
        build_pack(out, bundle=SAMPLE)
    after = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before
    assert not [p for p in out.iterdir() if ".kvf-" in p.name]
    with pytest.raises(InputError, match="pass --bundle"):
        build_pack(out, bundle=tmp_path / "gone")
