"""vLLM's v1 KV block pool as each release runs it: a model of which block a request is handed next.

This module is the one home of the fact "which KV blocks does vLLM hand out next, and which freed
block can a later request hit". tests/engines/test_vllm_allocator_port.py replays traces recorded from
vLLM's own BlockPool and KVCacheManager (scripts/record_vllm_block_traces.py,
tests/data/vllm_block_traces/) through it and requires the same blocks and the same free queue, call
for call.

What the releases do (vllm/v1/core/block_pool.py, kv_cache_utils.py, kv_cache_manager.py and
single_type_kv_cache_manager.py of 0.10.2, 0.23.0, 0.24.0, 0.26.0, 0.27.0, 0.28.0 and 0.29.0):

- The pool has num_gpu_blocks blocks, ids 0..n-1. FreeKVCacheBlockQueue (kv_cache_utils.py) is a
  doubly linked list in id order at start; BlockPool.__init__ pops block 0 as the null block
  (a placeholder never handed out, never freed, never cached).
- get_new_blocks(n) pops n blocks from the head (popleft_n), or raises ValueError without change when
  fewer than n are free. With prefix caching on, a popped block that still has a hash is evicted
  from the cache then (_maybe_evict_cached_block): a freed block keeps its data and its hash until
  it is handed out again.
- free_blocks(ordered) takes one reference off each block; those at zero rejoin the queue. The
  managers free a request's blocks in reverse (SingleTypeKVCacheManager.free: reversed(req_blocks)),
  so the tail block is the first to be evicted of its request.
  - 0.10.2 and 0.23.0: every block at zero is appended at the tail (append_n), in the order given:
    LRU. (0.23.0's free_blocks takes prepend=True from the sliding-window and Mamba managers only.)
  - 0.24.0, 0.26.0, 0.28.0 and 0.29.0: blocks without a hash (every block, caching off) are put at
    the head (prepend_n, in the order given; 0.28.0: "LIFO reuse of non-cached blocks for better
    GPU locality") and cached blocks at the tail ("FIFO reuse of cached blocks for LRU eviction
    behavior"): vLLM PR #42656. An uncached block freed by one request (its partial last block) is
    the next block handed out.
  - 0.27.0: the same with prefix caching on; with it off every freed block is appended (PR #48017,
    undone in 0.28.0 by PR #51482): the pool cycles through every block id.
- touch(blocks) adds a reference; a block at zero leaves the queue wherever it is (remove).
- cache_full_blocks names the request's full blocks by their block hashes; the map is hash -> the
  blocks under it in insertion order (no de-duplication: two blocks may hold the same hash), and
  get_cached_block returns the first. 0.29.0's BlockHashToBlockMap keeps one block or a dict; the
  order it answers in is the same.
- A block hash chains its parent's hash, the block's tokens and the extra keys
  (kv_cache_utils.hash_block_tokens); generate_block_hash_extra_keys adds the request's cache_salt
  to the FIRST block only (start_token_idx == 0), so a salt changes every hash of the chain and two
  requests with different salts never hit each other's blocks.
- KVCacheManager.get_computed_blocks: the longest run of cached blocks over the first
  (num_tokens - 1) // block_size hashes (the last token is always recomputed); allocate_slots fails
  (None, nothing changed) when the blocks it needs (new ones, plus hit blocks now at zero, which
  leave the free queue) exceed the free blocks; else touches the hits, pops the new blocks and caches
  the request's full blocks (min(computed + new tokens, num_tokens) // block_size).
- evict_blocks(ids) (0.23.0 on; the KV connectors report blocks whose load failed) drops the hash of
  each block named and leaves it where it is. reset_prefix_cache drops every hash, only when no
  block but the null block is held.
Not modelled: hybrid models (several KV cache groups, sliding window, Mamba), 0.29.0's partial
block entries (cache_partial_block: a block size larger than the hash block size), lookahead and
external (connector) tokens, the watermark, eagle.

The package: rules.py which free order each release runs (rule), pool.py the block pool, manager.py the
KV cache manager over it (requests arrive, step and finish).
"""

from __future__ import annotations

from forensics.engines.vllm_allocator.manager import KVCacheManager
from forensics.engines.vllm_allocator.pool import BlockPool
from forensics.engines.vllm_allocator.rules import RELEASES, RULES, Rule, rule

__all__ = ["RELEASES", "RULES", "BlockPool", "KVCacheManager", "Rule", "rule"]
