"""Watch on a simulated vLLM incident (`forensics simulate --engine vllm`, a seed no other watch test
uses) with NIXL lines written where vLLM writes them (tests/support/nixl.py): every line is alerted at
once, one alert per request it names, with its record's time (bundle.toml log_year) and the request id
vLLM logged; and nothing else is alerted on the vLLM nodes. The SGLang rules stay silent there: vLLM's
lines carry no placeholder (vLLM rejects a prompt longer than max_model_len, HTTP 400), no `Decode
transfer failed` and no pool line the pool rule reads (vLLM refuses to start with a pool smaller than
max_model_len: docs/vllm-lines.md), so what they would alert on is not in these logs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from forensics.simulate import build_config
from forensics.simulate.run import simulate
from forensics.watch import run
from tests.support import nixl
from tests.support.analysis import Findings

DARK = "decode-1"


def test_each_nixl_line_is_alerted_once_with_its_time(tmp_path: Path) -> None:
    simulate(tmp_path / "sim", build_config(seed=98, requests=200, engine="vllm", no_telemetry=DARK))
    plain = tmp_path / "sim" / "bundle"
    gw = Findings(plain)
    delivered = {r[0] for r in gw.rows("SELECT request_id FROM gateway WHERE status BETWEEN 200 AND 299 "
                                       "OR completion_tokens > 0")}  # fmt: skip
    root = tmp_path / "live"
    shutil.copytree(plain, root)
    written = nixl.write_lines(tmp_path / "sim", root, delivered, DARK)
    alerts = tmp_path / "alerts.jsonl"
    w = run(root, once=True, alerts=alerts, pages=False)
    assert set(w.detector.engines.decided.values()) == {"vllm"}
    got = [json.loads(x) for x in alerts.read_text().splitlines()]
    assert all(a["kind"] in ("nixl_failure", "nixl_expired") for a in got), {a["kind"] for a in got}
    expected = []
    for x in written:
        path, line = nixl.cite(root, x).rsplit(":", 1)
        expected.append((x.kind, x.node, path, int(line), f"2026-{x.stamp.replace(' ', 'T')}.000000Z"))
    assert sorted((a["kind"], a["node"], a["evidence"][0]["file"], a["evidence"][0]["line"], a["log_time"])
                  for a in got) == sorted(expected)  # fmt: skip
    # the request each names, as vLLM logged it: the gateway's id inside vLLM's engine id
    named = sorted(a["request_ids"][0] for a in got if a["request_ids"])
    assert len(named) == len([x for x in written if x.request_id])
    for x in written:
        if x.request_id:
            assert any(n.startswith(f"cmpl-{x.request_id}-0-") for n in named)
