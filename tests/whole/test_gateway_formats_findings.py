"""Issue #25: the same simulated incident, its gateway log written in each real format (the simulator
writes what each tool would have logged, and none logs bootstrap_room or the nodes), gives the same
findings as with the spec's gateway log, on seeds, page sizes and topologies the formats were not
written for. Where a format cannot carry a fact, the finding says "unknown", never something else:
- SMG's router log has no tenant: every account is unknown (empty), the cohorts all customer, and
  every other column is the same;
  and a signature response's delivery is shown by the decode node's output length (its reason names
  that line) instead of the gateway's token count;
- LiteLLM logs a failed request under its own call id, which no engine saw: the time join (model, time
  window, prompt length) gives a failed request that was another's source its room, so its row is the
  same; where several engine requests fit it, the source's request stays unknown (the same row with the
  source's id and account empty); no row is lost. LiteLLM's spend log keeps no request headers, so a
  cohort rule on a header cannot match it: those requests' cohort is customer.
Records no engine log names are listed in gateway_join.csv's table with a reason."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from forensics.simulate import build_config, simulate
from tests.support.analysis import Findings

CASES = {
    "seed5-p16": {"seed": 5, "requests": 400},
    # one prefill node, three decode nodes, one of them without page telemetry (the signature path)
    "seed12-p32-dark": {"seed": 12, "requests": 400, "page_size": 32, "prefill_count": 1, "decode_count": 3,
                        "no_telemetry": "decode-1"},
}  # fmt: skip
FORMATS = ("kvf_noroom", "litellm_spendlogs", "litellm_payload", "smg", "envoy", "otlp")
AFFECTED = """SELECT request_id, account_id, cohort, status, evidence, kinds, exposed_slots, source_requests,
                     decode_node, prefill_node, room, reason FROM affected_responses"""
EXPOSURES = """SELECT recipient_request_id, source_request_id, recipient_account_id, source_account_id, node, kind,
                      slots, status, recipient_cohort, source_cohort FROM exposures"""


def _run(tmp: Path, case: str, fmt: str) -> tuple[set[tuple], set[tuple], list[tuple], dict[str, str]]:
    out = tmp / f"{case}-{fmt}"
    simulate(out, build_config("default", gateway_format=fmt, **CASES[case]))
    ids: dict[str, str] = {}
    path = out / "truth" / "gateway_ids.csv"
    if path.exists():
        ids = {r["format_request_id"]: r["spec_request_id"] for r in csv.DictReader(path.open())}
    f = Findings(out / "bundle")

    def spec(i: str) -> str:
        return ids.get(i, i)

    affected = {(spec(r[0]), *r[1:]) for r in f.rows(AFFECTED)}
    exposures = {(spec(r[0]), spec(r[1]), *r[2:]) for r in f.rows(EXPOSURES)}
    unjoined = f.rows("SELECT request_id, reason FROM gateway_unjoined")
    status = {spec(r[0]): r[1:] for r in f.rows("SELECT request_id, status, headers IS NOT NULL FROM gateway")}
    f.con.close()
    return affected, exposures, unjoined, status


@pytest.fixture(scope="module")
def spec_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple]:
    tmp = tmp_path_factory.mktemp("formats")
    return {case: _run(tmp, case, "kvf") for case in CASES}


# each format on one case, the two that differ most on both (each run is a simulation and an analysis)
RUNS = [("kvf_noroom", c) for c in sorted(CASES)] + [("smg", c) for c in sorted(CASES)] + [
    ("litellm_spendlogs", "seed12-p32-dark"), ("litellm_payload", "seed5-p16"), ("envoy", "seed12-p32-dark"),
    ("otlp", "seed5-p16"),
]  # fmt: skip


@pytest.mark.parametrize(("fmt", "case"), RUNS)
def test_same_findings_as_the_spec_log(tmp_path: Path, spec_runs: dict[str, tuple], case: str, fmt: str) -> None:
    ref_aff, ref_exp, ref_unjoined, ref_status = spec_runs[case]
    aff, exp, unjoined, status = _run(tmp_path, case, fmt)
    assert ref_unjoined == []  # the spec's log names every room
    assert ref_aff and ref_exp, "the incident must have findings for the comparison to mean anything"
    if fmt == "smg":  # no tenant: account unknown, cohort customer, the rest the same
        assert {r[1] for r in aff} == {None} and {r[2] for r in aff} == {"customer"}
        assert {(r[0], *r[3:11]) for r in aff} == {(r[0], *r[3:11]) for r in ref_aff}
        assert {(*r[:2], *r[4:8]) for r in exp} == {(*r[:2], *r[4:8]) for r in ref_exp}
        assert {r[2] for r in exp} | {r[3] for r in exp} == {None}
        for r in aff:
            if r[4] == "signature" and r[3] == "confirmed":
                assert "by the decode node's log" in r[11], r
    elif fmt.startswith("litellm"):
        no_headers = fmt == "litellm_spendlogs"

        def plain(rows: set[tuple], cohorts: tuple[int, ...]) -> set[tuple]:
            return {tuple(None if no_headers and i in cohorts else v for i, v in enumerate(r)) for r in rows}

        assert plain(aff, (2,)) == plain(ref_aff, (2,))
        # a failed source LiteLLM logged under its call id: the same row (joined by time) or the source unknown
        failed = {r[1] for r in ref_exp if r[1] and ref_status[r[1]][0] != 200}
        kept = plain({r for r in ref_exp if r[1] not in failed}, (8, 9))
        assert kept <= plain(exp, (8, 9))
        joined = {r for r in ref_exp if r[1] in failed}
        unknown = {(r[0], "", r[2], None, *r[4:9], None) for r in joined}
        assert plain(exp, (8, 9)) - kept <= plain(joined, (8, 9)) | plain(unknown, (8, 9))
        assert len(exp) == len(ref_exp)
        if no_headers:  # a cohort differs only where the spec's record had headers the spend log lacks
            for r in aff - ref_aff:
                assert r[2] == "customer" and ref_status[r[0]][1], r
    else:
        assert aff == ref_aff
        assert exp == ref_exp
    # every record no engine names is listed with its reason; none of them reached an engine
    assert all(reason.startswith("no engine request log names") for _, reason in unjoined)
    affected_ids = {r[0] for r in ref_aff}
    assert not affected_ids & {status_id for status_id, _ in unjoined}


def test_an_exposed_response_without_a_gateway_record_is_reported(tmp_path: Path) -> None:
    """A recipient the page events show exposed, whose gateway record is missing: still an affected
    response, named by the rid its decode node logged, its account empty (unknown) and said so."""
    simulate(tmp_path / "sim", build_config("default", seed=7, requests=400))
    bundle = tmp_path / "sim" / "bundle"
    before = Findings(bundle)
    rows = before.rows(
        """SELECT a.request_id, a.room, a.decode_node, a.status, a.kinds, a.exposed_slots FROM affected_responses a
           JOIN gateway g USING (request_id) JOIN files f USING (file_id)
           WHERE a.evidence = 'pages' AND f.path LIKE '%.jsonl' ORDER BY a.request_id LIMIT 1"""
    )
    rid = before.rows(
        f"SELECT min(rid) FROM engine_requests WHERE node = '{rows[0][2]}' AND room = {rows[0][1]} AND rid <> ''"
    )[0][0]
    others = set(before.rows("SELECT * FROM affected_responses")) - set(
        before.rows(f"SELECT * FROM affected_responses WHERE request_id = '{rows[0][0]}'")
    )
    before.con.close()
    victim = rows[0]
    for path in (bundle / "gateway").glob("*.jsonl"):
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join(x for x in lines if f'"request_id": "{victim[0]}"' not in x))
    after = Findings(bundle)
    got = after.rows(
        f"""SELECT request_id, account_id, status, kinds, exposed_slots, reason FROM affected_responses
            WHERE room = {victim[1]}"""
    )
    assert got == [(rid, None, victim[3], victim[4], victim[5], got[0][5])]
    assert "no gateway record names room" in got[0][5] and "the account is unknown" in got[0][5]
    # the other responses are as before, but for those whose source was the missing request
    rest = set(after.rows(f"SELECT * FROM affected_responses WHERE room <> {victim[1]}"))
    assert {r[0] for r in rest} == {r[0] for r in others}
    after.con.close()
