"""A client request logged in two gateway records must count once. An exact repeat (every field equal)
is rejected, naming the record it repeats; two records of one request id that differ in a field are
both kept, and neither doubles the request's exposed slots or its rows in the findings."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from forensics.simulate import build_config, simulate
from tests.support.analysis import Findings

FIELDS = (
    "request_id, account_id, api_token_id, client_ip, user_agent, model, status, prompt_tokens, "
    "completion_tokens, duration_ms, bootstrap_room, prefill_node, decode_node"
)
EXPOSURES = "SELECT * EXCLUDE (recipient_cohort, source_cohort) FROM exposures ORDER BY ALL"
AFFECTED = "SELECT * FROM affected_responses ORDER BY ALL"


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small simulated incident (the bundled sample takes 25 s per analysis; this one 3 s)."""
    out = tmp_path_factory.mktemp("repeats")
    simulate(out, build_config("default", seed=4, requests=500))
    return out / "bundle"


@pytest.fixture(scope="module")
def clean(sample: Path) -> Findings:
    return Findings(sample)


def _count(f: Findings, query: str, rid: str) -> int:
    return f.con.execute(query, [rid]).fetchall()[0][0]


def _record(f: Findings, request_id: str, shift_ms: int) -> dict:
    names = [c.strip() for c in FIELDS.split(",")]
    row = f.con.execute(
        f"SELECT strftime(ts + to_milliseconds(?), '%Y-%m-%dT%H:%M:%S.%gZ'), {FIELDS} "
        "FROM gateway WHERE request_id = ?",
        [shift_ms, request_id],
    ).fetchall()
    assert len(row) == 1
    return {"ts": row[0][0], **dict(zip(names, row[0][1:], strict=True))}


@pytest.mark.parametrize("shift_ms", [0, 1])
def test_a_request_logged_twice_counts_once(tmp_path: Path, sample: Path, clean: Findings, shift_ms: int) -> None:
    # the recipient with the most exposure pairs: a doubled count would show in its slots
    rid = clean.rows("SELECT recipient_request_id FROM exposures GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1")[0][0]
    bundle = tmp_path / "bundle"
    shutil.copytree(sample, bundle)
    (bundle / "gateway" / "gw-repeat.jsonl").write_text(json.dumps(_record(clean, rid, shift_ms)) + "\n")
    f = Findings(bundle)
    assert f.rows(EXPOSURES) == clean.rows(EXPOSURES)
    assert f.rows(AFFECTED) == clean.rows(AFFECTED)
    assert _count(f, "SELECT count(*) FROM affected_responses WHERE request_id = ?", rid) == 1
    rejected = f.rows(
        "SELECT f.path, r.row, r.reason FROM rejected r JOIN files f USING (file_id) WHERE f.path LIKE '%repeat%'"
    )
    if shift_ms == 0:  # an exact repeat: rejected, naming the record it repeats
        assert len(rejected) == 1 and rejected[0][:2] == ("gateway/gw-repeat.jsonl", 1)
        assert rejected[0][2].startswith(f"duplicate gateway record: request_id {rid} with every field as at gateway/")
        assert _count(f, "SELECT count(*) FROM gateway WHERE request_id = ?", rid) == 1
    else:  # another record of the same request id: kept (it is evidence), counted once
        assert rejected == []
        assert _count(f, "SELECT count(*) FROM gateway WHERE request_id = ?", rid) == 2


def _report_counts(f: Findings) -> dict[str, list[dict]]:
    from forensics.db import run_query
    from forensics.report.data import rows

    run_query(f.con, "report", "report_affected")
    return {q: rows(f.con, q) for q in ("exclusion_totals", "cohort_counts", "blast_nodes", "scope_status")}


def test_a_request_in_two_records_naming_two_accounts_counts_once(
    tmp_path: Path, sample: Path, clean: Findings
) -> None:
    """Two records of one request id that name different accounts: both accounts are shown (either may
    be the request's), but every count of requests and of affected responses takes the request once."""
    from forensics.findings import headline

    rid = clean.rows("SELECT recipient_request_id FROM exposures GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1")[0][0]
    account = clean.con.execute("SELECT account_id FROM gateway WHERE request_id = ?", [rid]).fetchall()[0][0]
    bundle = tmp_path / "bundle"
    shutil.copytree(sample, bundle)
    record = {**_record(clean, rid, 0), "account_id": "acct-second-record"}
    (bundle / "gateway" / "gw-repeat.jsonl").write_text(json.dumps(record) + "\n")
    f = Findings(bundle)
    assert f.rows("SELECT * FROM gateway_repeats") == [(rid, 2)]
    assert clean.rows("SELECT count(*) FROM gateway_repeats") == [(0,)]
    assert _count(f, "SELECT count(*) FROM affected_responses WHERE request_id = ?", rid) == 2  # both accounts

    head, clean_head = headline(f.con), headline(clean.con)
    pairs = _count(clean, "SELECT count(*) FROM exposures WHERE recipient_request_id = ?", rid)
    assert head == {**clean_head, "pairs": clean_head["pairs"] + pairs}  # exposures.csv: a row per account named
    want, got = _report_counts(clean), _report_counts(f)
    totals, clean_totals = got["exclusion_totals"][0], want["exclusion_totals"][0]
    assert totals["requests_before"] == clean_totals["requests_before"]  # one request, not two
    assert totals["accounts_before"] == clean_totals["accounts_before"] + 1  # the second account is named
    drop = ("accounts_before", "accounts_after", "customer_accounts")  # the second account is named
    same = {k: v for k, v in clean_totals.items() if k not in drop}
    assert {k: v for k, v in totals.items() if k not in drop} == same
    skip = ("accounts", "affected_accounts", "pairs")  # pairs: a row per account named, as in exposures.csv
    for name in ("cohort_counts", "blast_nodes", "scope_status"):
        assert [{k: v for k, v in r.items() if k not in skip} for r in got[name]] == [
            {k: v for k, v in r.items() if k not in skip} for r in want[name]
        ], name
    accounts = dict(f.rows("SELECT account_id, responses_affected FROM accounts"))
    assert accounts["acct-second-record"] == 1
    assert accounts[account] == dict(clean.rows("SELECT account_id, responses_affected FROM accounts"))[account]
