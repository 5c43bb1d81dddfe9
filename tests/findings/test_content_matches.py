"""Issue #33, content evidence where the gateway holds text: on a simulated incident whose gateway logs
prompts and responses (LiteLLM StandardLoggingPayload) and whose decode node has no page telemetry,
responses decoded over other requests' KV echo them (--echo-rate); the content matches are scored
against the simulator's truth, and no text reaches the database, a CSV, the report or the manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forensics.pipeline import investigate
from forensics.simulate import build_config, simulate
from tests import support

pytestmark = pytest.mark.slow  # a whole simulated incident

PLANT = "Quixoticplanted zebrafishcanary"


def _plant(path: Path) -> None:
    """Every record's prompt and response carry the planted words (so any copy of the text shows)."""
    out = []
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        for m in rec["messages"]:
            m["content"] += f" {PLANT}"
        for c in (rec.get("response") or {}).get("choices", []):
            c["message"]["content"] += f" {PLANT}"
        out.append(json.dumps(rec))
    path.write_text("\n".join(out) + "\n")


@pytest.fixture(scope="module")
def incident(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("content")
    sim = work / "sim"
    cfg = build_config("default", seed=4, requests=1500, gateway_format="litellm_payload", no_telemetry="decode-2",
                       echo_rate=0.5, echo_noise=0.1)  # fmt: skip
    simulate(sim, cfg)
    _plant(sim / "bundle" / "gateway" / "litellm_payload.jsonl")
    investigate(sim / "bundle", work / "sim.out")
    return sim


def test_content_matches_against_the_truth(incident: Path) -> None:
    r = support.bench_module("content_eval").score(incident, [3])
    assert r["true_pairs"] > 50 and r["echoed_pairs"] > 20
    c = r["csv"]
    assert c == r["by_threshold"][3]  # the CSV holds the pairs of content_match
    assert c["precision"] >= 0.9, r
    assert c["recall_echoed"] >= 0.8, r
    # responses without an echo carry no evidence: recall over every true pair stays near the echo rate
    assert 0.3 <= c["recall"] <= 0.6, r


def test_no_text_in_any_output(incident: Path) -> None:
    out = incident.parent / "sim.out"
    con = support.open_db(out / "incident.duckdb")
    try:
        assert con.execute("SELECT count(*) FROM content_fingerprints").fetchone()[0] > 0
        assert con.execute("SELECT count(*) FROM content_matches WHERE content_match").fetchone()[0] > 0
        assert con.execute("SELECT count(*) FROM content_pairs").fetchone()[0] > 0
    finally:
        con.close()
    files = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.name == "content_matches.csv" for p in files)
    for p in files:
        raw = p.read_bytes().lower()
        for w in PLANT.lower().split():
            assert w.encode() not in raw, (p.name, w)
