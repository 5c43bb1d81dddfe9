"""Watch reads a vLLM node's request lines through vLLM's own reader (forensics.watch.engines), as ingest
does: the node is decided by its start-up lines, its lines give the rows the per-line reader gives (room
NULL: no SGLang rule fires on them), its times take bundle.toml [engine] log_year, and the decision
survives a restart through the state file; an SGLang node beside it is read as before."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from forensics.watch import Watch
from tests import support

BANNER = support.DATA / "audit" / "vllm_v1_hybrid_ok.log"
PD = support.DATA / "vllm_lines" / "composed_pd_0.33.0.log"


def _folder(tmp_path: Path) -> Path:
    root = tmp_path / "live"
    shutil.copytree(support.EXAMPLE / "bundle", root)
    text = (root / "bundle.toml").read_text()
    (root / "bundle.toml").write_text(text.replace("[engine]\n", "[engine]\nlog_year = 2026\n"))
    (root / "engine" / "decode-0" / "server.log").write_bytes(BANNER.read_bytes() + PD.read_bytes())
    return root


def test_a_vllm_node_is_read_by_its_reader(tmp_path: Path) -> None:
    root = _folder(tmp_path)
    state = tmp_path / "state.json"
    w = Watch(root, alerts=tmp_path / "alerts.jsonl", state=state, pages=False)
    w.poll()
    assert w.detector.engines.decided.get("decode-0") == "vllm"
    assert w.detector.engines.decided.get("prefill-0") == "sglang"
    # the clock reached the last vLLM line's time (09-10 12:00:03 of 2026, UTC), the SGLang node's too
    last = datetime(2026, 9, 10, 12, 0, 3, tzinfo=ZoneInfo("UTC")).timestamp()
    assert w.detector.clock >= last
    assert not [r for r in w.detector.rooms.values() if r.decode_node == "decode-0"]
    # no alert names the vLLM node (the SGLang prefill's own pool alert is the example's)
    alerts = [json.loads(x) for x in (tmp_path / "alerts.jsonl").read_text().splitlines()]
    assert alerts and all(a["node"] == "prefill-0" for a in alerts)
    w.save()
    assert json.loads(state.read_text())["detector"]["engines"]["decode-0"] == "vllm"
    again = Watch(root, alerts=tmp_path / "alerts.jsonl", state=state, pages=False)
    assert again.detector.engines.decided["decode-0"] == "vllm"
