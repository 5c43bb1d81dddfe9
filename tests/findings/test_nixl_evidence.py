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

import csv
import re
import shutil
from pathlib import Path

import pytest

from forensics.engines.vllm.shapes import render_record
from forensics.simulate import build_config
from forensics.simulate.run import simulate
from tests.support.analysis import Findings

DARK = "decode-1"
_ADDED = re.compile(r"^.* INFO (?P<t>\d{2}-\d{2} \d{2}:\d{2}:\d{2}) \[async_llm\.py:\d+\] Added request (?P<id>\S+)\.$")


def _truth(out: Path) -> list[dict[str, str]]:
    with (out / "truth" / "responses.csv").open(newline="") as fh:
        return list(csv.DictReader(fh))


def _added(log: Path, request_id: str) -> tuple[int, str, str]:
    """(line number, time stamp, engine id) of the node's `Added request` line of the client request."""
    for n, line in enumerate(log.read_text().splitlines(), start=1):
        if (m := _ADDED.match(line)) and m["id"].startswith(f"cmpl-{request_id}-0-"):
            return n, m["t"], m["id"]
    raise AssertionError(f"no Added request line of {request_id} in {log}")


def _insert(log: Path, after: int, line: str) -> int:
    """Write `line` after line `after` of `log`; its line number."""
    lines = log.read_text().splitlines(keepends=True)
    lines.insert(after, line + "\n")
    log.write_text("".join(lines))
    return after + 1


def _failure(ftype: str, rid: str | None, remote: str | None) -> str:
    ctx = {"failure_type": ftype, "request_id": rid, "engine_id": "e-local"}
    if remote is not None:
        ctx |= {"remote_engine_id": "e-remote", "remote_request_id": remote, "remote_host": "prefill-0",
                "remote_port": 5600, "num_local_blocks": 3, "num_remote_blocks": 3,
                "local_block_ids_sample": [4, 5, 6]}  # fmt: skip
    return f"NIXL transfer failure: {ftype}. Marking blocks as invalid | Context: {ctx}"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    out = tmp_path_factory.mktemp("nixl")
    simulate(out / "sim", build_config(seed=97, requests=240, engine="vllm", no_telemetry=DARK))
    truth = _truth(out / "sim")
    plain = out / "sim" / "bundle"
    before = Findings(plain)
    # delivered: the client got an answer (a 2xx, or tokens before an abort), as its gateway record says
    delivered = {r[0] for r in before.rows("SELECT request_id FROM gateway WHERE status BETWEEN 200 AND 299 "
                                           "OR completion_tokens > 0")}  # fmt: skip
    bundle = out / "lines"
    shutil.copytree(plain, bundle)

    def _delivered(t: dict[str, str]) -> bool:
        return t["request_id"] in delivered

    def pick(node: str, n: int = 1) -> list[dict[str, str]]:  # delivered customer responses on the node
        got = [t for t in truth if t["decode_node"] == node and _delivered(t) and t["cohort"] == "customer"]
        assert len(got) >= n, node
        return got[:n]

    expect: dict[str, str] = {}  # request id -> the cite of the line that names it
    log = lambda node: bundle / "engine" / node / "server.log"  # noqa: E731
    # decode-side receive failures: two delivered responses on the node without page events, and one
    # undelivered (a client abort on a decode that took the request: its Added request line)
    undelivered = next(t for t in truth if not _delivered(t) and t["decode_node"]
                       and f"Added request cmpl-{t['request_id']}-0-" in log(t["decode_node"]).read_text())  # fmt: skip
    for t in [*pick(DARK, 2), undelivered]:
        node = t["decode_node"]
        n, stamp, eid = _added(log(node), t["request_id"])
        _, _, pid = _added(log(t["prefill_node"]), t["request_id"])
        rec = render_record(stamp, "base_worker.py:984", _failure("transfer_failed", eid, pid), level="ERROR", pid=7)
        at = _insert(log(node), n, rec)
        if _delivered(t):
            expect[t["request_id"]] = f"engine/{node}/server.log:{at}"
    # a handshake failure names no request
    handshake = _failure("handshake_failed", None, None)
    _insert(log(DARK), 3, render_record("08-29 10:00:00", "base_worker.py:984", handshake, level="ERROR", pid=7))
    # prefill-side: a lease that expired (a response on an instrumented decode), a read after release
    for t, msg in (
        (pick("decode-0")[0], "Releasing expired KV blocks for request {} which were retrieved by 0 remote "
                                    "worker(s) before lease expired."),
        (pick("decode-2")[0], "Potentially invalid KV blocks for unrecognized request {} were retrieved by a "
                                    "decode worker. They may have expired."),
    ):  # fmt: skip
        node = t["prefill_node"]
        n, stamp, pid = _added(log(node), t["request_id"])
        at = _insert(log(node), n, render_record(stamp, "base_worker.py:2249", msg.format(pid), level="WARNING"))
        expect[t["request_id"]] = f"engine/{node}/server.log:{at}"
    # the cites above were taken before later lines were inserted above them: take each again by its text
    for rid in list(expect):
        path, _ = expect[rid].rsplit(":", 1)
        for n, line in enumerate((bundle.parent / "lines" / path).read_text().splitlines(), start=1):
            if ("NIXL" in line or "KV blocks for" in line) and f"cmpl-{rid}-0-" in line:
                expect[rid] = f"{path}:{n}"
    return {"truth": truth, "plain": before, "lines": Findings(bundle), "expect": expect, "delivered": delivered}


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
