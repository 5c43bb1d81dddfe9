"""Decode side of the event loop: the transfer read, generation, output writes, frees and aborts."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from forensics.simulate import sglang_lines
from forensics.simulate.cluster import Node, page_ranges, token_ranges
from forensics.simulate.config import MS, S, SimConfig
from forensics.simulate.request import Request

if TYPE_CHECKING:
    from forensics.simulate.state import St

D_END = 8
_U64 = (1 << 64) - 1


def canary_violation(slot: int, position: int, source: int, total: int) -> str:
    """SGLang's KV canary violation as its --kv-canary log mode writes it (one WARNING of several lines,
    sglang/srt/kv_canary/runner/violation_reporter.py _format_violation, 0.5.23): the real-KV hash of a slot
    that holds another request's KV (`source`, whose stamp the hashes stand for) fails the read check."""
    stored = (source * 0x9E3779B97F4A7C15 + 1) & _U64
    expected = (slot * 0xBF58476D1CE4E5B9 + position + 1) & _U64
    return (
        f"kv_canary violation: launch_tag=HEAD_K_FULL fail_reason=verify_real_kv_hash slot_idx={slot} "
        f"position={position} stored_token={source % 151552} expected_token=-1 stored_chain_hash={stored:#018x} "
        f"expected_aux={expected:#018x}\n"
        f"KV cache canary violation detected (kernel_kind=HEAD_K_FULL, slot_idx={slot}, position={position})\n"
        "canary_kind:       per_forward_head_k_full\n"
        "  fail_reasons: verify_real_kv_hash\n"
        f"  stored:   token_id={source % 151552}   position={position} prev_hash={stored:#018x}\n"
        f"  expected: prev_hash={expected:#018x}\n"
        f"  total_violations={total} ring_overflow=False step_when_pumped=0"
    )


class DecodeSide:
    """Mixed into Engine; the attributes below are the Engine's."""

    cfg: SimConfig
    reqs: list[Request]
    st: list[St]
    nodes: dict[str, Node]
    holder: dict[str, np.ndarray]
    touch: dict[str, np.ndarray]
    rng: random.Random
    ps: int
    push: Callable[[int, int, int], None]
    u: Callable[[float, float], int]

    def abort(self, t: int, i: int) -> None:
        r, s = self.reqs[i], self.st[i]
        d = self.nodes[r.decode]
        assert s.d_pages is not None
        d.log(t, sglang_lines.transfer_failed(r.rid_d, r.room))
        for a, b in page_ranges(s.d_pages, self.ps):
            d.ev(t, "free", r.room, a, b)
        self._release(d, s.d_pages, t)
        r.aborted, r.status, r.completion, r.t_end = True, 499, 0, t
        d.jsonl.append(
            (
                d.clock(t),
                {
                    "rid": r.rid_d,
                    "room": r.room,
                    "prompt_tokens": r.L,
                    "completion_tokens": 0,
                    "cached_tokens": 0,
                    "finish_reason": {"type": "abort", "message": "Aborted by AbortReq."},
                    "e2e_latency": round((t - r.t0) / S, 4),
                },
            )
        )

    def _release(self, d: Node, pages: np.ndarray, t: int) -> None:
        self.holder[d.name][pages] = -1
        self.touch[d.name][pages] = t
        d.pool.free(pages)

    def d_read(self, t: int, i: int) -> None:
        r, s, ps = self.reqs[i], self.st[i], self.ps
        d = self.nodes[r.decode]
        assert s.d_pages is not None
        pos, flagged = 0, False
        for a, b in token_ranges(s.d_pages, ps, 0, r.L):
            d.ev(t, "read", r.room, a, b)
            slot = d.slots.read(a, b, i, s.d_alloc_t)
            if slot >= 0 and self.cfg.integrity_lines == "canary" and not flagged:
                d.canary_at.append(t)
                d.log(t, canary_violation(slot, pos + slot - a, int(d.slots.content[slot]), len(d.canary_at)))
                flagged = True  # the first violation of a read: the canary reports per slot, the test per read
            pos += b - a
        self.touch[d.name][s.d_pages] = t
        n_out = min(-(-r.out // ps), len(d.pool))
        s.out_eff = min(r.out, n_out * ps)
        pages = d.pool.alloc(n_out)
        assert pages is not None
        s.out_pages = pages
        for a, b in page_ranges(pages, ps):
            d.ev(t + 10, "alloc", r.room, a, b)
        self.holder[d.name][pages] = i
        self.touch[d.name][pages] = t
        s.end_t = t + 20 + s.out_eff * int(self.rng.uniform(12, 35) * MS)
        self.push(s.end_t, D_END, i)

    def d_end(self, t: int, i: int) -> None:
        r, s, ps = self.reqs[i], self.st[i], self.ps
        d = self.nodes[r.decode]
        assert s.d_pages is not None and s.out_pages is not None
        for a, b in token_ranges(s.out_pages, ps, 0, s.out_eff):
            d.ev(t, "write", r.room, a, b, src="decode")
            d.slots.write(a, b, i, t)
        for pages in (s.d_pages, s.out_pages):
            for a, b in page_ranges(pages, ps):
                d.ev(t + 10, "free", r.room, a, b)
                d.slots.release(a, b, i)
        self._release(d, np.concatenate((s.d_pages, s.out_pages)), t)
        fin = (
            {"type": "length", "length": r.out}
            if s.out_eff < r.out or self.rng.random() < 0.3
            else {"type": "stop", "matched": 151329}
        )
        r.status, r.completion, r.t_end = 200, s.out_eff, t + self.u(0.5, 3)
        d.log(
            t + 10,
            sglang_lines.time_stats_decode(
                r.rid_d,
                r.room,
                r.L,
                s.out_eff,
                (s.d_alloc_t - r.t0) / S,
                (s.land_t - s.d_alloc_t) / S,
                (s.read_t - s.land_t) / S,
                (t - s.read_t) / S,
                r.t0 / S,
            ),
        )
        d.jsonl.append(
            (
                d.clock(t + 10),
                {
                    "rid": r.rid_d,
                    "room": r.room,
                    "prompt_tokens": r.L,
                    "completion_tokens": s.out_eff,
                    "cached_tokens": 0,
                    "finish_reason": fin,
                    "e2e_latency": round((t - r.t0) / S, 4),
                },
            )
        )
