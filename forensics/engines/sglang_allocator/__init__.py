"""SGLang's KV slot allocators as each release runs them: a port, and the registry of page-reuse rules.

This module is the one home of the fact "which slots does SGLang hand out next". The simulator
(forensics.simulate.cluster.PagePool) runs these classes; the allocator model
(forensics.ownership.kernels.allocator) and the likelihood model (forensics.findings.likelihood) take
their policy from `rule()`. tests/engines/test_allocator_port.py replays traces recorded from SGLang's
own classes (scripts/record_allocator_traces.py, tests/data/allocator_traces/) through this port and
requires the same slots, call for call.

What the releases do (sglang/srt/mem_cache/allocator.py in 0.4.9, 0.5.4 and 0.5.11;
sglang/srt/mem_cache/allocator/{base,token,paged}.py in 0.5.23):

- Both allocators start with free_pages = [1, 2, ..., n] and hand out from the front: slot (page
  size 1) or page 0 is never handed out ("The padded slot 0 is used for writing dummy outputs from
  padded tokens").
- TokenToKVPoolAllocator (page size 1) `free` APPENDS the freed slots, unsorted, in the order given:
  a FIFO queue. PagedTokenToKVPoolAllocator `free` takes torch.unique(free_index // page_size) (the
  freed pages, sorted, each once) and PREPENDS them: a LIFO stack, lowest freed page first.
- 0.5.4 and later take need_sort = disaggregation_mode in ("prefill", "decode")
  (model_executor/model_runner.py; 0.5.11 model_runner_kv_cache_mixin.py; 0.5.23
  mem_cache/kv_cache_configurator.py). With need_sort, frees go to release_pages (0.5.23 paged:
  staged_pages) instead, and join free_pages, the whole list sorted, only in merge_and_sort_free,
  which an allocation runs when free_pages looks too short: alloc when need > len(free_pages);
  alloc_extend when extend_num_tokens // page_size + batch_size + 1 > len(free_pages); alloc_decode
  when batch_size > len(free_pages). free_pages is then always ascending: lowest free page first.
  0.4.9 has no need_sort: PD nodes run the FIFO / LIFO rule.
- alloc_extend (paged) fills each request of the batch in order: first the rest of its last partial
  page (last_loc + 1, ...), then whole new pages, then a partial new page, its new pages taken
  consecutively from the front of free_pages after those of the requests before it. alloc_decode
  gives each request one slot: last_loc + 1, or the first slot of the next new page when its new
  token starts a page. A failed allocation (pool too short) returns None and changes nothing but a
  merge it ran.
- free_group_begin/end collect frees and free them as one call (torch.cat): one torch.unique over
  the whole group on the paged allocator. 0.5.23 adds free_page_ids (exactly the given pages, in the
  given order, no unique), whose grouped pages are released after the group's plain frees.
- backup_state/restore_state save and restore (free_pages[, release_pages]); 0.5.23 has neither.

The package: rules.py the rule each release runs per page size and PD mode (rule, registry), port.py the
allocators themselves (Allocator).
"""

from __future__ import annotations

from forensics.engines.sglang_allocator.port import Allocator
from forensics.engines.sglang_allocator.rules import (
    PD_MODES,
    RELEASES,
    Rule,
    known_release,
    merge_slack,
    real_rules,
    registry,
    rule,
)

__all__ = [
    "PD_MODES",
    "RELEASES",
    "Allocator",
    "Rule",
    "known_release",
    "merge_slack",
    "real_rules",
    "registry",
    "rule",
]
