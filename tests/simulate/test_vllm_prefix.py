"""Prefix caching in `forensics simulate --engine vllm --vllm-pd` (forensics.simulate.vllm_prefix):
cache_salt per account (--cache-salt-rate) and the decode's own prefix cache (--decode-prefix-caching),
checked against the bundle's own page events and the allocator model, independently of the driver:
- no hit crosses a salt: every hit's reader and writer send the same salt (none, or the account's);
- hits happen on prefill and on decode, within an account and across accounts without a salt;
- a decode's transfer carries only the tokens its own cache missed (NixlConnector's end-trimmed read):
  per room, the decode's share rows and the transfer's slots add up to the slots it reads and shares;
- every hit whose slots hold other tokens (truth/prefix_hits.csv verdict `exposure`) is a true exposure
  in truth/exposures.csv, and every legitimate one is none."""

from __future__ import annotations

import csv
from pathlib import Path

import duckdb
import pytest

from forensics.engines import vllm_allocator as va
from forensics.simulate import build_config, vllm_prefix
from forensics.simulate.run import simulate


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("vllmprefix")
    cfg = build_config(
        seed=9113, requests=300, engine="vllm", vllm_pd=True, decode_prefix_caching=True, cache_salt_rate=0.3
    )
    simulate(out, cfg)
    return out


def test_options_need_vllm_pd() -> None:
    with pytest.raises(ValueError, match="--vllm-pd"):
        build_config(seed=1, requests=10, engine="vllm", cache_salt_rate=0.5)
    with pytest.raises(ValueError, match="--vllm-pd"):
        build_config(seed=1, requests=10, decode_prefix_caching=True)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        build_config(seed=1, requests=10, engine="vllm", vllm_pd=True, cache_salt_rate=2.0)


def test_hits_never_cross_a_salt_and_happen_where_vllm_has_them(sim: Path) -> None:
    account = {t["request_id"]: t["account_id"] for t in _read(sim / "truth" / "responses.csv")}
    hits = _read(sim / "truth" / "prefix_hits.csv")
    seen = set()
    for h in hits:
        reader, writer = h["request_id"], h["writer_request_id"]
        salt_r, salt_w = (vllm_prefix.salt(account[x], 0.3) for x in (reader, writer))
        assert (h["cache_salt"] or None) == salt_r
        if h["verdict"] == "prefix_hit":
            assert salt_r == salt_w, h  # a salt changes every hash of the chain: no hit across salts
            assert (account[reader] == account[writer]) == (h["same_account"] == "1")
            seen.add((h["role"], h["same_account"] == "1", salt_r is not None))
    # prefill and decode; within an account (salted or not); across accounts only without a salt
    for role in ("prefill", "decode"):
        assert {(role, True, True), (role, True, False), (role, False, False)} <= seen
        assert (role, False, True) not in seen


def test_decode_pulls_only_what_its_cache_missed(sim: Path) -> None:
    rows = duckdb.sql(
        f"""SELECT node, room, op, sum("end" - start) FROM read_parquet('{sim}/bundle/pages/*.parquet')
            WHERE op IN ('share', 'read', 'transfer') GROUP BY ALL"""
    ).fetchall()
    got: dict[tuple[str, int], dict[str, int]] = {}
    for node, room, op, n in rows:
        got.setdefault((node if op != "transfer" else "", room), {})[op] = int(n)
    decode_shares = 0
    for (node, room), ops in got.items():
        if not node.startswith("decode") or "read" not in ops:
            continue
        sent = got.get(("", room), {}).get("transfer", 0)
        if sent:  # the READ carried exactly the tokens the decode reads, past the ones it hit
            assert sent == ops["read"], (node, room)
        decode_shares += "share" in ops
    assert decode_shares


def test_hit_verdicts_agree_with_the_exposures(sim: Path) -> None:
    pairs = {(e["recipient_request_id"], e["source_request_id"]) for e in _read(sim / "truth" / "exposures.csv")}
    hits = _read(sim / "truth" / "prefix_hits.csv")
    bad = {(h["request_id"], h["writer_request_id"]) for h in hits if h["verdict"] == "exposure"}
    assert bad and bad <= pairs  # a stale READ cached on the decode, then hit
    assert all(h["role"] == "decode" for h in hits if h["verdict"] == "exposure")  # a prefill computes its own


def test_delayed_caching_as_vllm_does() -> None:
    """allocate_slots(delay_cache_blocks=True): nothing of the request is hit before cache_blocks, and
    nothing ever if the load fails (the request is freed uncached); its hits are touched at once."""
    mgr = va.KVCacheManager(16, 4, True, 64, "0.29.0")
    prompt = list(range(10))  # two full blocks and a partial one
    assert mgr.arrive("a", prompt, None)[:2] == ([], 0)
    hits, computed, _ = mgr.arrive("b", prompt, None, delay_cache=True)
    assert computed == 8 and len(hits) == 2  # a's full blocks
    mgr.finish("a")
    assert mgr.arrive("c", prompt + [99] * 8, None, delay_cache=True)[1] == 8  # b's own blocks not cached yet
    mgr.cache_blocks("c", 18)
    assert mgr.arrive("d", prompt + [99] * 8 + [5], None)[1] == 16  # c's, once cached
    mgr.finish("b")
    mgr.finish("d")
    assert mgr.arrive("e", [7] * 9, None, delay_cache=True)[1] == 0
    mgr.finish("e")  # its load failed: never cached
    assert mgr.arrive("f", [7] * 9, None)[1] == 0
    assert mgr.arrive("g", [1] * 9, "s")[1] == 0
    assert mgr.arrive("h", [1] * 9, "t")[1] == 0  # another salt
    assert mgr.arrive("i", [1] * 9, "s")[1] == 8  # the same salt
