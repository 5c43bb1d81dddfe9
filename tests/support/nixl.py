"""vLLM's NIXL lines written into a simulated vLLM bundle (`forensics simulate --engine vllm`) where vLLM
writes them: nixl/base_worker.py `_log_failure` on the decode that pulls (a receive that failed),
`_reap_expired_send_leases` (a lease that ran out) and pull_worker.py's read of freed blocks on the
prefill (the line forms of tests/data/integrity_lines/vllm_nixl.log), each naming a request by vLLM's ids
as the node logged them (its `Added request` line), in the record its neighbours have. What each line
names is chosen here, so a test's expectations follow from these choices and the simulator's truth."""

from __future__ import annotations

import csv
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from forensics.engines.vllm.shapes import render_record
from forensics.simulate import build_config
from forensics.simulate.run import simulate
from tests.support.analysis import Findings

_ADDED = re.compile(r"^.* INFO (?P<t>\d{2}-\d{2} \d{2}:\d{2}:\d{2}) \[async_llm\.py:\d+\] Added request (?P<id>\S+)\.$")


@dataclass(frozen=True)
class Line:
    """A NIXL line written: where (node, the stamp it carries), its kind, the client request it names
    (None: none), whether that response was delivered, and its text (to find its line number again)."""

    node: str
    stamp: str
    kind: str
    request_id: str | None
    delivered: bool
    text: str


def truth(out: Path) -> list[dict[str, str]]:
    with (out / "truth" / "responses.csv").open(newline="") as fh:
        return list(csv.DictReader(fh))


def _added(log: Path, request_id: str) -> tuple[int, str, str] | None:
    """(line number, time stamp, engine id) of the node's `Added request` line of the client request."""
    for n, line in enumerate(log.read_text().splitlines(), start=1):
        if (m := _ADDED.match(line)) and m["id"].startswith(f"cmpl-{request_id}-0-"):
            return n, m["t"], m["id"]
    return None


def _insert(log: Path, after: int, line: str) -> None:
    lines = log.read_text().splitlines(keepends=True)
    lines.insert(after, line + "\n")
    log.write_text("".join(lines))


def failure(ftype: str, rid: str | None, remote: str | None) -> str:
    ctx = {"failure_type": ftype, "request_id": rid, "engine_id": "e-local"}
    if remote is not None:
        ctx |= {"remote_engine_id": "e-remote", "remote_request_id": remote, "remote_host": "prefill-0",
                "remote_port": 5600, "num_local_blocks": 3, "num_remote_blocks": 3,
                "local_block_ids_sample": [4, 5, 6]}  # fmt: skip
    return f"NIXL transfer failure: {ftype}. Marking blocks as invalid | Context: {ctx}"


EXPIRED = "Releasing expired KV blocks for request {} which were retrieved by 0 remote worker(s) before lease expired."
FREED = (
    "Potentially invalid KV blocks for unrecognized request {} were retrieved by a decode worker. "
    "They may have expired."
)


def write_lines(sim: Path, bundle: Path, delivered: set[str], dark: str) -> list[Line]:
    """Write NIXL lines into `bundle` (a copy of sim/bundle): receive failures of two delivered customer
    responses on `dark` and of one undelivered response, a handshake failure naming no request, a lease
    expiry of a delivered response on decode-0 and a read of freed blocks of one on decode-2 (on their
    prefills). `delivered`: the client requests whose client got an answer."""
    rows = truth(sim)
    log = lambda node: bundle / "engine" / node / "server.log"  # noqa: E731

    def pick(node: str, n: int = 1) -> list[dict[str, str]]:
        got = [
            t for t in rows if t["decode_node"] == node and t["request_id"] in delivered and t["cohort"] == "customer"
        ]
        assert len(got) >= n, node
        return got[:n]

    undelivered = next(t for t in rows if t["request_id"] not in delivered and t["decode_node"]
                       and _added(log(t["decode_node"]), t["request_id"]))  # fmt: skip
    out: list[Line] = []
    for t in [*pick(dark, 2), undelivered]:
        node, rid = t["decode_node"], t["request_id"]
        at, stamp, eid = _added(log(node), rid) or (0, "", "")
        pid = (_added(log(t["prefill_node"]), rid) or (0, "", ""))[2]
        msg = failure("transfer_failed", eid, pid)
        _insert(log(node), at, render_record(stamp, "base_worker.py:984", msg, level="ERROR", pid=7))
        out.append(Line(node, stamp, "nixl_failure", rid, rid in delivered, msg))
    msg = failure("handshake_failed", None, None)
    _insert(log(dark), 3, render_record("08-29 10:00:00", "base_worker.py:984", msg, level="ERROR", pid=7))
    out.append(Line(dark, "08-29 10:00:00", "nixl_failure", None, False, msg))
    for t, form in ((pick("decode-0")[0], EXPIRED), (pick("decode-2")[0], FREED)):
        node, rid = t["prefill_node"], t["request_id"]
        at, stamp, pid = _added(log(node), rid) or (0, "", "")
        msg = form.format(pid)
        _insert(log(node), at, render_record(stamp, "base_worker.py:2249", msg, level="WARNING"))
        out.append(Line(node, stamp, "nixl_expired", rid, True, msg))
    return out


def cite(bundle: Path, line: Line) -> str:
    """`engine/<node>/server.log:<n>`: where the line now is."""
    rel = f"engine/{line.node}/server.log"
    for n, text in enumerate((bundle / rel).read_text().splitlines(), start=1):
        if text.endswith(line.text):
            return f"{rel}:{n}"
    raise AssertionError(f"{line.text[:60]} not in {rel}")


def simulated(out: Path, seed: int, requests: int, dark: str, copy: str) -> tuple[Findings, set[str], Path, list[Line]]:
    """A simulated vLLM run in out/sim with `dark` without page events, and a copy of its bundle (out/copy)
    with the NIXL lines written into it: the plain run's findings, the delivered request ids (the client
    got an answer: a 2xx, or tokens before an abort, as its gateway record says), the copy, the lines."""
    simulate(out / "sim", build_config(seed=seed, requests=requests, engine="vllm", no_telemetry=dark))
    plain = Findings(out / "sim" / "bundle")
    delivered = {r[0] for r in plain.rows("SELECT request_id FROM gateway WHERE status BETWEEN 200 AND 299 "
                                          "OR completion_tokens > 0")}  # fmt: skip
    bundle = out / copy
    shutil.copytree(out / "sim" / "bundle", bundle)
    return plain, delivered, bundle, write_lines(out / "sim", bundle, delivered, dark)
