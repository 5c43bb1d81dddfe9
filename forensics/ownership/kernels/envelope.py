"""The last writer of every slot of a set of slot ranges, among candidate writes: the upper envelope.

For each item (a read whose content predates its allocation), the open slot ranges are split at every
boundary of the item's candidate writes; each elementary part takes the candidate with the highest
event key `k` covering it (the last write before the read). Done with an offline segment tree over
the parts of all items at once (range "chmax" updates, then one push-down), so the cost grows with
candidates x log(parts), not with the slots or with the parts a candidate spans.

Slot positions and items are packed into one int64 key: item * 2^40 + slot (slots < 2^40, items <
2^23), so one sort orders every item's boundaries.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from forensics.errors import CapacityError

SLOT_BITS = 40
MAX_SLOT = 1 << SLOT_BITS
MAX_ITEM = 1 << (63 - SLOT_BITS)


@dataclass
class Envelope:
    """Maximal runs of the open ranges with one last writer: `k` is -1 where no candidate covers."""

    item: np.ndarray
    s: np.ndarray
    e: np.ndarray
    k: np.ndarray


def range_chmax(n: int, lo: np.ndarray, hi: np.ndarray, val: np.ndarray) -> np.ndarray:
    """best[i] = max(val[j] for j with lo[j] <= i < hi[j]), or -1: offline segment tree, vectorized by level."""
    size = 1 << max(1, (max(n, 1) - 1).bit_length())
    tree = np.full(2 * size, -1, dtype=np.int64)
    left, right, v = lo.astype(np.int64) + size, hi.astype(np.int64) + size, val.astype(np.int64)
    while left.size:
        keep = left < right
        left, right, v = left[keep], right[keep], v[keep]
        odd = (left & 1).astype(bool)
        np.maximum.at(tree, left[odd], v[odd])
        left = left + odd
        odd = (right & 1).astype(bool)
        right = right - odd
        np.maximum.at(tree, right[odd], v[odd])
        left >>= 1
        right >>= 1
    level = 1
    while level < size:  # push each node's value down to its children, top to bottom
        nodes = np.arange(level, 2 * level)
        tree[2 * nodes] = np.maximum(tree[2 * nodes], tree[nodes])
        tree[2 * nodes + 1] = np.maximum(tree[2 * nodes + 1], tree[nodes])
        level *= 2
    return tree[size : size + n]


def envelope(
    open_item: np.ndarray,
    open_s: np.ndarray,
    open_e: np.ndarray,
    cand_item: np.ndarray,
    cand_s: np.ndarray,
    cand_e: np.ndarray,
    cand_k: np.ndarray,
) -> Envelope:
    """Split each open range [open_s, open_e) of an item by its candidates; each part's last writer.

    Candidates must lie within their item's open span; open ranges of one item must not overlap.
    """
    order = np.lexsort((open_s, open_item))
    open_item, open_s, open_e = open_item[order], open_s[order], open_e[order]
    # items renumbered densely (they may be offset ids), and back at the end
    ids = open_item[np.concatenate([[True], open_item[1:] != open_item[:-1]])] if open_item.size else open_item
    open_item = np.searchsorted(ids, open_item)
    cand_item = np.searchsorted(ids, cand_item)
    for name, arr, top in (("item", open_item, MAX_ITEM), ("slot", open_e, MAX_SLOT), ("slot", cand_e, MAX_SLOT)):
        if arr.size and (arr.min() < 0 or arr.max() >= top):
            raise CapacityError(
                f"{name} out of range for the last-writer search's key (items < 2^23, slots < 2^40): "
                "analyse the archive in parts with --since/--until"
            )
    ok = open_item.astype(np.int64) << SLOT_BITS
    ck = cand_item.astype(np.int64) << SLOT_BITS
    keys = np.sort(np.concatenate([ok + open_s, ok + open_e, ck + cand_s, ck + cand_e]))
    if keys.size:  # sorted distinct keys (np.unique hashes, which is slower here)
        keys = keys[np.concatenate([[True], keys[1:] != keys[:-1]])]
    best = range_chmax(keys.size, np.searchsorted(keys, ck + cand_s), np.searchsorted(keys, ck + cand_e), cand_k)
    # the parts inside each open range: positions [lo, hi) of keys
    lo = np.searchsorted(keys, ok + open_s)
    hi = np.searchsorted(keys, ok + open_e)
    counts = hi - lo
    total = int(counts.sum())
    starts = np.repeat(lo - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts) + np.arange(total)
    item = np.repeat(open_item.astype(np.int64), counts)
    s = keys[starts] & (MAX_SLOT - 1)
    e = keys[starts + 1] & (MAX_SLOT - 1)
    k = best[starts]
    # merge adjacent parts of one item with the same last writer into maximal runs
    new = np.ones(total, dtype=bool)
    if total:
        new[1:] = (item[1:] != item[:-1]) | (k[1:] != k[:-1]) | (s[1:] != e[:-1])
    first = np.flatnonzero(new)
    last = np.concatenate([first[1:], [total]]) - 1
    return Envelope(ids[item[first]] if total else item[first], s[first], e[last], k[first])
