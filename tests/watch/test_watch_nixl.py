"""Watch on a simulated vLLM incident (`forensics simulate --engine vllm`, a seed no other watch test
uses) with NIXL lines written where vLLM writes them (tests/support/nixl.py): every line is alerted at
once, one alert per request it names, with its record's time (bundle.toml log_year) and the request id
vLLM logged; and nothing else is alerted on the vLLM nodes. The SGLang rules stay silent there: vLLM's
lines carry no placeholder (vLLM rejects a prompt longer than max_model_len, HTTP 400), no `Decode
transfer failed` and no pool line the pool rule reads (vLLM refuses to start with a pool smaller than
max_model_len: docs/vllm-lines.md), so what they would alert on is not in these logs."""

from __future__ import annotations

import json
from pathlib import Path

from forensics.watch import run
from tests.support import nixl

DARK = "decode-1"


def test_each_nixl_line_is_alerted_once_with_its_time(tmp_path: Path) -> None:
    _, _, root, written = nixl.simulated(tmp_path, 98, 200, DARK, "live")
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
