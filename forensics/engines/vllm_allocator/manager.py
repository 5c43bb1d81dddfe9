"""vLLM's v1 KV cache manager for one full-attention group, over the block pool: block hashes (the cache
salt on the first block only), prefix hits, allocation, a request's blocks freed tail first."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from forensics.engines.vllm_allocator.pool import BlockPool


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class BlockHasher:
    """Block hashes as keys equal where vLLM's are: each an interned id of (parent id, the block's
    tokens, the cache salt on the first block only). sha256 is not reproduced; equality is."""

    def __init__(self) -> None:
        self._ids: dict[tuple[int, tuple[int, ...], str | None], int] = {}

    def chain(self, tokens: Sequence[int], salt: str | None, block_size: int, start: list[int]) -> list[int]:
        """`start` (the hashes so far) extended over the full blocks of `tokens`."""
        out = list(start)
        for i in range(len(out), len(tokens) // block_size):
            parent = out[-1] if out else -1
            key = (parent, tuple(tokens[i * block_size : (i + 1) * block_size]), salt if i == 0 and salt else None)
            out.append(self._ids.setdefault(key, len(self._ids)))
        return out


@dataclass
class _Request:
    tokens: list[int]
    salt: str | None
    hashes: list[int]
    blocks: list[int]
    num_cached: int
    num_computed: int
    delayed: bool = False  # allocate_slots(delay_cache_blocks=True): cached by cache_blocks, or never


class KVCacheManager:
    """vllm.v1.core.kv_cache_manager.KVCacheManager for one full-attention group: requests arrive,
    step one token at a time and finish."""

    def __init__(self, num_blocks: int, block_size: int, enable_caching: bool, max_model_len: int, release: str):
        self.pool = BlockPool(num_blocks, enable_caching, release)
        self.block_size = block_size
        self.max_model_len = max_model_len
        self.hasher = BlockHasher()
        self.requests: dict[str, _Request] = {}

    def _computed(self, req: _Request) -> list[int]:
        if not self.pool.enable_caching:
            return []
        hits = []
        for h in req.hashes[: (len(req.tokens) - 1) // self.block_size]:
            b = self.pool.get_cached_block(h)
            if b is None:
                break
            hits.append(b)
        return hits

    def _allocate(self, req: _Request, num_new: int, hits: list[int]) -> bool:
        pool = self.pool
        computed = req.num_computed + len(hits) * self.block_size
        need = min(computed + num_new, self.max_model_len)
        wanted = _cdiv(need, self.block_size) - len(hits) - len(req.blocks)
        wanted += sum(1 for b in hits if pool.ref[b] == 0 and b != pool.NULL)
        if wanted > pool.num_free:
            return False
        if pool.enable_caching:
            pool.touch(hits)
        req.blocks.extend(hits)
        req.blocks.extend(pool.get_new_blocks(max(0, _cdiv(need, self.block_size) - len(req.blocks))))
        if pool.enable_caching and not req.delayed:
            full = min(computed + num_new, len(req.tokens)) // self.block_size
            if full > req.num_cached:
                pool.cache_full_blocks(req.blocks[req.num_cached : full], req.hashes[req.num_cached : full])
                req.num_cached = full
        return True

    def arrive(
        self, rid: str, prompt: Sequence[int], salt: str | None, delay_cache: bool = False
    ) -> tuple[list[int], int, list[int] | None]:
        """get_computed_blocks then allocate_slots for the prompt: (hit blocks, computed tokens, the
        request's blocks or None when it is not admitted). `delay_cache`: allocate_slots'
        delay_cache_blocks, as the scheduler passes it for a KV connector's asynchronous load (the
        blocks are cached by `cache_blocks` once the load is done, and never if it fails)."""
        hashes = self.hasher.chain(prompt, salt, self.block_size, [])
        req = _Request(list(prompt), salt, hashes, [], 0, 0, delay_cache)
        hits = self._computed(req)
        computed = len(hits) * self.block_size
        req.num_cached = len(hits)
        if not self._allocate(req, len(prompt) - computed, hits):
            return hits, computed, None
        req.num_computed = len(prompt)
        self.requests[rid] = req
        return hits, computed, list(req.blocks)

    def cache_blocks(self, rid: str, num_tokens: int) -> None:
        """KVCacheManager.cache_blocks after a delayed load: the request's full blocks of its first
        `num_tokens` tokens under their hashes (the scheduler's _update_waiting_for_remote_kv)."""
        req = self.requests[rid]
        req.delayed = False
        if not self.pool.enable_caching:
            return
        full = min(num_tokens, len(req.tokens)) // self.block_size
        if full > req.num_cached:
            self.pool.cache_full_blocks(req.blocks[req.num_cached : full], req.hashes[req.num_cached : full])
            req.num_cached = full

    def step(self, rid: str, token: int) -> list[int] | None:
        """One output token: allocate_slots for it; None when the pool cannot (the request stays)."""
        req = self.requests[rid]
        req.tokens.append(token)
        req.hashes = self.hasher.chain(req.tokens, req.salt, self.block_size, req.hashes)
        if not self._allocate(req, 1, []):
            return None
        req.num_computed += 1
        return list(req.blocks)

    def finish(self, rid: str) -> None:
        """free: the request's blocks in reverse, tail first."""
        self.pool.free_blocks(reversed(self.requests.pop(rid).blocks))
