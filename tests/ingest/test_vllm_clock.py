"""gateway_clock for vLLM nodes (issue #50): vLLM's lines name no room, so the bounds of each node's clock
against the gateway's come from the request lines whose ids hold the gateway's request id
(ingest/queries/vllm_clock.sql). Against the simulator's truth (`simulate --engine vllm --vllm-pd`, seeds no
other test uses, block sizes 16 and 32, fixed offsets and drawn skews): every node gets a row, and its
bounds hold the node's true offset (node clock - gateway clock, the simulator's clock_offset_us)."""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.db import connect
from forensics.ingest import ingest_into
from forensics.simulate import build_config
from forensics.simulate.run import simulate


@pytest.mark.parametrize(
    ("seed", "bs", "skew"), [(611, 16, None), (617, 32, 3000)], ids=["seed611-bs16", "seed617-bs32-skew3s"]
)
def test_every_vllm_node_is_bounded_and_its_bounds_hold_its_true_offset(
    seed: int, bs: int, skew: int | None, tmp_path: Path
) -> None:
    cfg = build_config(seed=seed, requests=150, page_size=bs, engine="vllm", vllm_pd=True, clock_skew_ms=skew)
    simulate(tmp_path, cfg)
    con = connect(":memory:")
    ingest_into(con, tmp_path / "bundle")
    got = {n: (lo, hi, ok, k) for n, k, lo, hi, ok in con.execute("SELECT * FROM gateway_clock").fetchall()}
    truth = {n.name: n.clock_offset_us for n in cfg.nodes}
    assert sorted(got) == sorted(truth)
    for node, offset in truth.items():
        lo, hi, ok, requests = got[node]
        assert ok and requests > 0, node
        assert lo < offset < hi, (node, lo, offset, hi)
        # a second's resolution, joined over many requests: the bounds are far narrower than the skew drawn
        assert hi - lo < 1_100_000, node
