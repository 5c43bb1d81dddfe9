"""vLLM's NIXL lines as evidence (issue #50): a simulated vLLM incident (`forensics simulate --engine vllm`,
decode-1 without page events, a seed no other test uses), and the same bundle with NIXL lines written
into its logs where vLLM writes them (nixl/base_worker.py `_log_failure` on the decode that pulls,
`_reap_expired_send_leases` and pull_worker.py's read of freed blocks on the prefill; the line forms of
tests/data/integrity_lines/vllm_nixl.log), each naming a request by vLLM's ids as the node logged them
(its `Added request` line). Expected from those choices and the simulator's truth alone: every line
naming a delivered response doubts it, with the line cited, and only it; a line naming an undelivered
response or none names nothing; a response on the node without page events that a line names carries
the line's evidence (`signature`), not `none`, in one row; every other response keeps its finding."""

from __future__ import annotations

import pytest

from tests.support import nixl
from tests.support.analysis import Findings

DARK = "decode-1"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    out = tmp_path_factory.mktemp("nixl")
    before, delivered, bundle, lines = nixl.simulated(out, 97, 240, DARK, "lines")
    expect = {x.request_id: nixl.cite(bundle, x) for x in lines if x.request_id and x.delivered}
    assert len(expect) == 4
    return {"truth": nixl.truth(out / "sim"), "plain": before, "lines": Findings(bundle), "expect": expect,
            "delivered": delivered}  # fmt: skip


def test_each_line_names_the_delivered_response_it_hit(runs: dict[str, object]) -> None:
    f, expect = runs["lines"], runs["expect"]
    assert isinstance(f, Findings) and isinstance(expect, dict)
    got = f.rows("SELECT request_id, effect, cite FROM integrity_responses ORDER BY ALL")
    assert sorted((rid, "doubt", cite) for rid, cite in expect.items()) == got
    # each line read once, by vLLM's reader, with its record's time (bundle.toml log_year)
    events = f.rows("SELECT kind, count(*), count(ts) FROM integrity_events GROUP BY 1 ORDER BY 1")
    assert events == [("nixl_expired", 2, 2), ("nixl_failure", 4, 4)]


def test_a_named_response_is_indeterminate_with_the_line_and_counted_once(runs: dict[str, object]) -> None:
    f, plain, expect = runs["lines"], runs["plain"], runs["expect"]
    assert isinstance(f, Findings) and isinstance(plain, Findings) and isinstance(expect, dict)
    rows = f.rows("SELECT request_id, status, evidence, reason, decode_node FROM affected_responses")
    ids = [r[0] for r in rows]
    assert len(ids) == len(set(ids))  # one row per response: the headline counts it once
    by_id = {r[0]: r[1:] for r in rows}
    before = {r[0]: r[1:3] for r in plain.rows("SELECT request_id, status, evidence FROM affected_responses")}
    for rid, cite in expect.items():
        status, evidence, reason, node = by_id[rid]
        assert cite in reason
        assert status == "indeterminate" or before.get(rid, ("",))[0] == "confirmed"
        if node == DARK:  # was `none` (nothing in the evidence spoke of it); the line is engine-log evidence
            assert before[rid] == ("indeterminate", "none") and evidence == "signature"
    # every other response keeps its finding; the lines add only the responses they name
    others = {k: v[:2] for k, v in by_id.items() if k not in expect}
    assert others == {k: v for k, v in before.items() if k not in expect}
    assert set(by_id) == set(before) | set(expect)


def test_the_dark_node_is_never_cleared(runs: dict[str, object]) -> None:
    f, truth, delivered = runs["lines"], runs["truth"], runs["delivered"]
    assert isinstance(f, Findings) and isinstance(truth, list) and isinstance(delivered, set)
    got = dict(f.rows("SELECT request_id, status FROM affected_responses"))
    dark = {t["request_id"] for t in truth if t["decode_node"] == DARK and t["request_id"] in delivered}
    assert dark and dark <= set(got) and {got[r] for r in dark} == {"indeterminate"}
