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
  as NixlConnector reads only the blocks the decode missed; behind a gateway that logs no room, by the
  sender's own token order, from the block the decode's hit ends at)."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from forensics.simulate import build_config
from forensics.simulate.run import simulate
from tests.support.analysis import Findings

# the third: block size 64 behind Envoy (no room in the gateway's records, so the pull's blocks are read
# in the sender's token order, not by the decode's remote_block_ids), 3 prefill and 2 decode nodes
ENVOY = {"gateway_format": "envoy", "prefill_count": 3, "decode_count": 2}
CASES = [(9104, 16, 600, {}), (9115, 32, 300, {}), (931, 64, 300, ENVOY)]


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module", params=CASES, ids=[f"seed{s}-bs{b}" for s, b, _, _ in CASES])
def incident(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, Path]:
    seed, bs, n, topology = request.param
    out = tmp_path_factory.mktemp(f"vllmprefix{seed}")
    cfg = build_config(
        seed=seed,
        requests=n,
        page_size=bs,
        engine="vllm",
        vllm_pd=True,
        decode_prefix_caching=True,
        cache_salt_rate=0.3,
        **topology,
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


def _to_truth(out: Path) -> dict[str, str]:
    """Each row key the tool may print for a simulated request (its gateway id, renamed or not, or
    `room:<room>` where no gateway record names the room: Envoy logs no room) -> the simulator's id."""
    keys = {f"room:{t['room']}": t["request_id"] for t in _read(out / "truth" / "responses.csv") if t["room"]}
    ids = out / "truth" / "gateway_ids.csv"
    if ids.exists():
        keys |= {r["format_request_id"]: r["spec_request_id"] for r in _read(ids)}
    return keys


def _key(keys: dict[str, str], rid: str | None, room: str | None) -> str:
    """A row's id read back to the simulator's: through the gateway's renaming, else its room's where the
    row is keyed by its room (no gateway record names it)."""
    if rid and rid in keys:
        return keys[rid]
    if (not rid or rid.startswith("room:")) and f"room:{room}" in keys:
        return keys[f"room:{room}"]
    return rid or ""


def _affected(out: Path, f: Findings) -> dict[str, str]:
    keys = _to_truth(out)
    got: dict[str, str] = {}
    for r, m, s in f.rows("SELECT request_id, room::VARCHAR, status FROM affected_responses"):
        k = _key(keys, r, m)  # a response on two rows (its room's and its record's): confirmed if either is
        got[k] = "confirmed" if "confirmed" in (s, got.get(k)) else s
    return got


def _pairs(out: Path, f: Findings, table: str) -> set[tuple[str, str, str]]:
    keys = _to_truth(out)
    status = "status" if table == "exposures" else "'possible'"
    sql = f"""SELECT recipient_request_id, recipient_room::VARCHAR, source_request_id, source_room::VARCHAR,
              {status} FROM {table}"""
    return {(_key(keys, a, ra), _key(keys, b, rb), st) for a, ra, b, rb, st in f.rows(sql)}


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
    found = {(a, b) for a, b, _ in _pairs(incident[1], with_pages, "exposures")}
    assert not legit & found
    got = _affected(incident[1], with_pages)
    assert {k for k, s in got.items() if s == "confirmed"} <= exposed


def test_hit_on_blocks_a_stale_read_filled_is_confirmed(incident: tuple[int, Path], with_pages: Findings) -> None:
    _, out = incident
    _, _, _, bad = _truth(out)
    assert bad
    found = _pairs(out, with_pages, "exposures")
    assert {(a, b, "confirmed") for a, b in bad} <= found


def test_logs_only_every_exposure_indeterminate_with_its_sources(
    incident: tuple[int, Path], logs_only: Findings
) -> None:
    exposed, pairs, legit, _ = _truth(incident[1])
    got = _affected(incident[1], logs_only)
    assert exposed <= set(got)
    assert {k for k, s in got.items() if s == "confirmed"} <= exposed
    found = {(a, b) for a, b, _ in _pairs(incident[1], logs_only, "exposures")}
    assert not legit & found
    possible = {(a, b) for a, b, _ in _pairs(incident[1], logs_only, "possible_sources")}
    dark = {p for p in pairs if got.get(p[0]) == "indeterminate"}
    assert dark and dark <= possible | found


def test_with_page_events_every_exposure_found_and_every_confirmed_pair_true(
    incident: tuple[int, Path], with_pages: Findings
) -> None:
    exposed, pairs, _, _ = _truth(incident[1])
    got = _affected(incident[1], with_pages)
    found = _pairs(incident[1], with_pages, "exposures")
    assert exposed <= set(got)
    assert pairs <= {(a, b) for a, b, _ in found}
    assert {(a, b) for a, b, s in found if s == "confirmed"} <= pairs
