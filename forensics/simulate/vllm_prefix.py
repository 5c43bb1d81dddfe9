"""Prefix caching in the simulated vLLM PD path (forensics.simulate.vllm_pd): each request's cache_salt,
the token each slot holds, and the truth of every prefix-cache hit.

vLLM's OpenAI server takes `cache_salt` per request (vllm/entrypoints/openai/chat_completion/protocol.py
and completion/protocol.py, 0.29.0); the block hasher puts it into the first block's extra keys only
(kv_cache_utils.generate_block_hash_extra_keys: `start_token_idx == 0 and request.cache_salt`, 0.10.2
kv_cache_utils.py:528, 0.29.0 kv_cache_utils.py:604), so every hash of a salted prompt's chain differs
from the unsalted one's and from another salt's. Here an account sends one salt with every request, or
none (a share of accounts, drawn from the account's name so that no other draw of the run moves).

A hit hands a request blocks another request computed (BlockPool.touch: a reference more; a block at
zero leaves the free queue wherever it is, 0.10.2 block_pool.py:236, 0.29.0 block_pool.py:702). What
a hit block holds is decided by its tokens, not by who wrote it: the simulator keeps the token id each
slot holds (`Tokens`) and compares it with the reader's own at every hit (`Hits.check`). Where they are
the same the hit is legitimate, whoever computed the block (a prefix hit, not an exposure; across
accounts it is the timing side channel cache_salt exists for); where they differ the block is cached
under the reader's hashes but holds another request's KV (a decode's blocks filled through a stale
reference and then cached, vLLM #52234): an exposure, of the request whose KV the slot holds.
Both go to truth/prefix_hits.csv (`verdict`), the exposures to truth/exposures.csv as well.
"""

from __future__ import annotations

import hashlib

import numpy as np

from forensics.simulate.cluster import STALE, Exposures, SlotState

HIT_COLUMNS = [
    "request_id",
    "node",
    "role",
    "writer_request_id",
    "same_account",
    "cache_salt",
    "slots",
    "verdict",
]


def salt(account: str, rate: float) -> str | None:
    """The cache_salt the account sends with every request (None: none), for a share `rate` of accounts."""
    if rate <= 0.0:
        return None
    u = int.from_bytes(hashlib.sha256(account.encode()).digest()[:8], "big") / 2**64
    return f"salt-{hashlib.sha256(b'salt' + account.encode()).hexdigest()[:16]}" if u < rate else None


def prompt_tokens(idx: int, sp_id: int, sp_len: int, length: int) -> np.ndarray:
    """A request's prompt as token ids: the system prompt's (the same for every request of it), then its own."""
    sp = min(sp_len, length) if sp_id >= 0 else 0
    own = np.arange(sp, length, dtype=np.int64) | ((idx + 1) << 32)
    return np.concatenate([np.arange(sp, dtype=np.int64) | ((sp_id + 1) << 20), own])


def output_tokens(idx: int, start: int, n: int) -> np.ndarray:
    """The ids of a request's output tokens at positions start.. (its own: no other request has them)."""
    return np.arange(start, start + n, dtype=np.int64) | ((idx + 1) << 32) | (1 << 62)


class Hits:
    """Every prefix-cache hit's verdict, by comparing the slots' tokens with the reader's."""

    def __init__(self, exp: Exposures) -> None:
        self.exp = exp
        self.rows: dict[tuple[int, str, str, int, str], int] = {}

    def check(
        self, node: str, role: str, me: int, slots: SlotState, tok: np.ndarray, idx: np.ndarray, want: np.ndarray
    ) -> None:
        """The hit of request `me` on slots `idx` of `node`, whose tokens should be `want`."""
        if not len(idx):
            return
        writer, same = slots.content[idx], tok[idx] == want
        for w in np.unique(writer).tolist():
            m = writer == w
            for ok in (True, False):
                k = m & (same if ok else ~same)
                if not k.any():
                    continue
                key = (me, node, role, int(w), "prefix_hit" if ok else "exposure")
                self.rows[key] = self.rows.get(key, 0) + int(k.sum())
                if not ok and w != me:
                    self.exp.add(me, int(w), node, STALE, idx[k])

    def table(
        self, request_id: dict[int, str], account: dict[int, str], salts: dict[int, str | None]
    ) -> list[list[object]]:
        out: list[list[object]] = []
        for (me, node, role, w, verdict), n in self.rows.items():
            wid = request_id.get(w, "") if w >= 0 else ""
            same = int(w >= 0 and account[w] == account[me])
            out.append([request_id[me], node, role, wid, same, salts.get(me) or "", n, verdict])
        return sorted(out, key=lambda r: tuple(str(x) for x in r))
