"""Issue #50: vLLM PD incidents with prefix caching on prefill and on decode and with cache salts
(`forensics simulate --engine vllm --vllm-pd --decode-prefix-caching --cache-salt-rate 0.3`; seeds and
block sizes no other test uses), investigated with every node's page events and with the logs alone,
against the simulator's truth (truth/prefix_hits.csv: each hit's verdict by the tokens its slots hold):
- a legitimate prefix hit (the reader's own tokens, whoever computed them, across accounts too) is never
  an exposure, with page events or without; every confirmed response is truly exposed;
- a decode's prefix hit on blocks a stale reference filled (cached under the prompt's hashes) is a
  confirmed exposure with its true source (exposure_segments: a share of slots a transfer carried
  another room's KV into);
- logs only, every exposed response is reported (indeterminate) with its true sources among its
  possible sources;
- with page events, every exposure is found and every confirmed pair is true, where a stale READ's own
  decode hit some of the prompt too (pull_sightings reads the blocks the decode's line names, end-trimmed
  as NixlConnector reads only the blocks the decode missed)."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from forensics.simulate import build_config
from forensics.simulate.run import simulate
from tests.support.analysis import Findings

CASES = [(9104, 16, 600), (9115, 32, 300)]


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module", params=CASES, ids=[f"seed{s}-bs{b}" for s, b, _ in CASES])
def incident(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, Path]:
    seed, bs, n = request.param
    out = tmp_path_factory.mktemp(f"vllmprefix{seed}")
    cfg = build_config(
        seed=seed,
        requests=n,
        page_size=bs,
        engine="vllm",
        vllm_pd=True,
        decode_prefix_caching=True,
        cache_salt_rate=0.3,
    )
    simulate(out, cfg)
    return seed, out


@pytest.fixture(scope="module")
def with_pages(incident: tuple[int, Path]) -> Findings:
    return Findings(incident[1] / "bundle")


@pytest.fixture(scope="module")
def logs_only(incident: tuple[int, Path], tmp_path_factory: pytest.TempPathFactory) -> Findings:
    dst = tmp_path_factory.mktemp("logs") / "bundle"
    shutil.copytree(incident[1] / "bundle", dst, ignore=shutil.ignore_patterns("pages"))
    return Findings(dst)


def _truth(out: Path) -> tuple[set[str], set[tuple[str, str]], set[tuple[str, str]], set[tuple[str, str]]]:
    exposed = {t["request_id"] for t in _read(out / "truth" / "responses.csv") if t["exposed"] == "1"}
    pairs = {(e["recipient_request_id"], e["source_request_id"]) for e in _read(out / "truth" / "exposures.csv")}
    hits = _read(out / "truth" / "prefix_hits.csv")
    legit = {(h["request_id"], h["writer_request_id"]) for h in hits if h["verdict"] == "prefix_hit"} - pairs
    bad = {(h["request_id"], h["writer_request_id"]) for h in hits if h["verdict"] == "exposure"}
    return exposed, pairs, legit, bad


def test_legitimate_hits_are_never_exposures(incident: tuple[int, Path], with_pages: Findings) -> None:
    exposed, _, legit, _ = _truth(incident[1])
    assert legit  # prefix hits on blocks other requests computed happen
    found = {(a, b) for a, b in with_pages.rows("SELECT recipient_request_id, source_request_id FROM exposures")}
    assert not legit & found
    got = dict(with_pages.rows("SELECT request_id, status FROM affected_responses"))
    assert {k for k, s in got.items() if s == "confirmed"} <= exposed


def test_hit_on_blocks_a_stale_read_filled_is_confirmed(incident: tuple[int, Path], with_pages: Findings) -> None:
    _, out = incident
    _, _, _, bad = _truth(out)
    assert bad
    found = set(with_pages.rows("SELECT recipient_request_id, source_request_id, status FROM exposures"))
    assert {(a, b, "confirmed") for a, b in bad} <= found


def test_logs_only_every_exposure_indeterminate_with_its_sources(
    incident: tuple[int, Path], logs_only: Findings
) -> None:
    exposed, pairs, legit, _ = _truth(incident[1])
    got = dict(logs_only.rows("SELECT request_id, status FROM affected_responses"))
    assert exposed <= set(got)
    assert {k for k, s in got.items() if s == "confirmed"} <= exposed
    found = {(a, b) for a, b in logs_only.rows("SELECT recipient_request_id, source_request_id FROM exposures")}
    assert not legit & found
    possible = set(logs_only.rows("SELECT recipient_request_id, source_request_id FROM possible_sources"))
    dark = {p for p in pairs if got.get(p[0]) == "indeterminate"}
    assert dark and dark <= possible | found


def test_with_page_events_every_exposure_found_and_every_confirmed_pair_true(
    incident: tuple[int, Path], with_pages: Findings
) -> None:
    exposed, pairs, _, _ = _truth(incident[1])
    got = dict(with_pages.rows("SELECT request_id, status FROM affected_responses"))
    found = with_pages.rows("SELECT recipient_request_id, source_request_id, status FROM exposures")
    assert exposed <= set(got)
    assert pairs <= {(a, b) for a, b, _ in found}
    assert {(a, b) for a, b, s in found if s == "confirmed"} <= pairs
