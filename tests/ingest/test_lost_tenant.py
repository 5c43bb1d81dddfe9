"""Issue #47, a tenant field lost on the way: LiteLLM writes its tenant keys in every record (null when
unset), so a key in no record of a file was dropped or renamed by an exporter or a pipeline. The
accounts it would have given are unknown (NULL), never the next field's value (a key alias or a user
taken for the account), and a `missing_field` damage row names the path and a likely rename.

Expectations are computed here from the undamaged fixture's own records, never written in.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from forensics.db import connect
from forensics.ingest import ingest_gateway

FIXTURES = Path(__file__).parent.parent / "fixtures" / "gateway"


def _accounts(bundle: Path) -> tuple[dict[str, str | None], list]:
    con = connect(":memory:")
    try:
        files = ingest_gateway(con, bundle)
        rows = con.execute("SELECT request_id, account_id FROM gateway").fetchall()
        return dict(rows), files
    finally:
        con.close()


def _bundle(tmp: Path, name: str, data: bytes) -> Path:
    (tmp / "gateway").mkdir(parents=True)
    (tmp / "gateway" / name).write_bytes(data)
    return tmp


def _payload_records() -> list[dict]:
    return [json.loads(ln) for ln in (FIXTURES / "litellm_payload.jsonl").read_text().splitlines() if ln.strip()]


def _renamed(records: list[dict], key: str, new: str | None) -> bytes:
    out = []
    for r in records:
        meta = {(new if k == key else k): v for k, v in r["metadata"].items() if new is not None or k != key}
        out.append(json.dumps({**r, "metadata": meta}))
    return ("\n".join(out) + "\n").encode()


@pytest.mark.parametrize("new", ["user_api_key_teamId", None], ids=["renamed", "dropped"])
def test_the_payloads_team_key_lost_leaves_accounts_unknown_and_named(tmp_path: Path, new: str | None) -> None:
    records = _payload_records()
    clean, _ = _accounts(_bundle(tmp_path / "clean", "litellm_payload.jsonl", _renamed(records, "", None)))
    got, (f,) = _accounts(
        _bundle(tmp_path / "lost", "litellm_payload.jsonl", _renamed(records, "user_api_key_team_id", new))
    )
    assert set(got) == set(clean) and any(clean.values()), "every record is still read"
    # the team is the first tenant field: every account depended on it
    assert all(v is None for v in got.values()), {k: v for k, v in got.items() if v is not None}
    aliases = {r["metadata"]["user_api_key_alias"] for r in records} | {
        r["metadata"]["user_api_key_user_id"] for r in records
    }
    assert not aliases & set(got.values())
    (d,) = [d for d in f.damage if d.kind == "missing_field"]
    assert "metadata.user_api_key_team_id" in d.detail and d.records_lost == len(records)
    assert ("metadata.user_api_key_teamId may be it renamed" in d.detail) == (new is not None)


def test_a_lost_later_tenant_key_keeps_the_accounts_an_earlier_one_gives(tmp_path: Path) -> None:
    """The org key lost: records that name a team keep it; the others' accounts are unknown."""
    records = _payload_records()
    records[0] = {**records[0], "metadata": {**records[0]["metadata"], "user_api_key_team_id": None}}
    clean, _ = _accounts(_bundle(tmp_path / "clean", "litellm_payload.jsonl", _renamed(records, "", None)))
    got, (f,) = _accounts(
        _bundle(tmp_path / "lost", "litellm_payload.jsonl", _renamed(records, "user_api_key_org_id", None))
    )
    teamless = {r["id"] for r in records if r["metadata"]["user_api_key_team_id"] is None}
    assert teamless, "a record without a team must be there for the check to mean anything"
    assert {k for k, v in got.items() if v is None} == teamless
    assert {k: v for k, v in got.items() if k not in teamless} == {k: v for k, v in clean.items() if k not in teamless}
    (d,) = [d for d in f.damage if d.kind == "missing_field"]
    assert "metadata.user_api_key_org_id" in d.detail and d.records_lost == len(teamless)


def _spendlogs_without(columns: set[str], meta_key: str | None) -> bytes:
    rows = list(csv.DictReader(io.StringIO((FIXTURES / "litellm_spendlogs.csv").read_text())))
    names = [c for c in rows[0] if c not in columns]
    buf = io.StringIO()
    w = csv.DictWriter(buf, names, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        if meta_key:
            meta = json.loads(r["metadata"])
            meta.pop(meta_key, None)
            r = {**r, "metadata": json.dumps(meta)}
        w.writerow(r)
    return buf.getvalue().encode()


def test_spendlogs_team_column_dropped_is_read_from_its_metadata_text(tmp_path: Path) -> None:
    """A path into a JSON text column is looked for in that text: the team is still in metadata, so
    nothing is lost; without it too, the accounts are unknown and named."""
    clean, (fc,) = _accounts(_bundle(tmp_path / "clean", "litellm_spendlogs.csv", _spendlogs_without(set(), None)))
    assert not [d for d in fc.damage if d.kind == "missing_field"]
    got, (f,) = _accounts(_bundle(tmp_path / "col", "litellm_spendlogs.csv", _spendlogs_without({"team_id"}, None)))
    assert not [d for d in f.damage if d.kind == "missing_field"]
    assert got == clean
    both, (fb,) = _accounts(
        _bundle(tmp_path / "both", "litellm_spendlogs.csv", _spendlogs_without({"team_id"}, "user_api_key_team_id"))
    )
    assert all(v is None for v in both.values())
    (d,) = [d for d in fb.damage if d.kind == "missing_field"]
    assert "team_id" in d.detail


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.iterdir() if p.suffix in (".jsonl", ".csv", ".json")))
def test_no_fixture_as_its_writer_wrote_it_loses_a_tenant_field(tmp_path: Path, name: str) -> None:
    _, files = _accounts(_bundle(tmp_path, name, (FIXTURES / name).read_bytes()))
    assert not [d for f in files for d in f.damage if d.kind == "missing_field" and "writer" in d.detail]
