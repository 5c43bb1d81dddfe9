"""The scale generator's SGLang lines as programs: Req Time Stats, the over-length line, the transfer
failure and the --log-requests text lines, each split out of its render by forensics.simulate.sglang_lines,
and the Decode batch / Prefill batch lines of forensics.simulate.batch_lines, per node (its record prefix
is writer.write_engine's)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from forensics.simulate import sglang_lines
from forensics.simulate.batch_lines import decode_line, prefill_line
from forensics.simulate.scale.render import FIX, HEX, INT, LIT, REPR, TAB, split_template

if TYPE_CHECKING:
    from forensics.simulate.scale.templates import Bundle


def build(b: Bundle) -> None:
    """The SGLang lines of every node: sglang_lines' messages and the batch lines, as programs of b."""
    rel = b.a.release
    Int, F, R = (lambda c: [(INT, c, 0)]), (lambda c, d: [(FIX, c, d)]), (lambda c: [(REPR, c, 4)])
    rid = {"rid": [(HEX, "rid_hi", 16), (HEX, "rid_lo", 16)]}
    # sentinels: each slot's two values, as the messages print them
    v: dict[str, tuple[Any, Any]] = {
        "rid": ("f00dfeedf00dfeedf00dfeedf00dfeed", "beefcafebeefcafebeefcafebeefcafe"),
        "room": (6660000000000000001, 5550000000000000002),
        "L": (73100019, 84200027),
        "C": (5300041, 6400053),
        "M": (91700013, 92800017),
        "d1": (7100.0001, 8100.0001),
        "d2": (7200.0002, 8200.0002),
        "d3": (7300.0003, 8300.0003),
        "d4": (7400.0004, 8400.0004),
        "st": (7500.005, 8500.005),
    }
    text = {
        k: ((f"{a:.4f}", f"{b:.4f}") if k[0] == "d" else (f"{a:.3f}", f"{b:.3f}") if k == "st" else (str(a), str(b)))
        for k, (a, b) in v.items()
    }

    def msg(render: Any, names: list[str]) -> list[tuple[str, Any]]:
        return split_template(lambda k: render(*(v[n][k] for n in names)), {n: text[n] for n in names})

    # Req Time Stats, the over-length line and the transfer failure (sglang_lines)
    rts_p = msg(
        lambda r, room, L, d1, d2, st: sglang_lines.time_stats_prefill(r, room, L, d1, d2, st),
        ["rid", "room", "L", "d1", "d2", "st"],
    )
    rts_d = msg(sglang_lines.time_stats_decode, ["rid", "room", "L", "C", "d1", "d2", "d3", "d4", "st"])
    over = msg(lambda L, M, r: sglang_lines.overlength(L, M, r), ["L", "M", "rid"])
    fail = msg(sglang_lines.transfer_failed, ["rid", "room"])
    durs = {f"d{i}": F(f"d{i}", 4) for i in range(1, 5)} | {"st": F("st", 3)}
    base = {"room": Int("room"), "L": Int("L"), "C": Int("C"), "M": Int("M")} | rid | durs
    # --log-requests text lines (sglang_lines.received and finished)
    t_slots = {
        "rid": v["rid"],
        "host": ("zqhostzqa", "zqhostzqb"),
        "room": text["room"],
        "P": ("73100019", "84200027"),
        "C": text["C"],
        "K": ("4100039", "3200023"),
        "E": ("123.4567", "234.5671"),
        "rq": ("zqreqzqa", "zqreqzqb"),
    }
    text_slots = rid | {
        "room": Int("room"),
        "host": [(TAB, "host", 0)],
        "P": Int("P"),
        "C": Int("C"),
        "K": Int("K"),
        "E": R("E"),
        "rq": [(LIT, "req-", 0), (HEX, "rq", 16)],
    }
    recv = split_template(
        lambda k: sglang_lines.received(t_slots["rid"][k], t_slots["host"][k], int(t_slots["room"][k])),
        {n: t_slots[n] for n in ("rid", "host", "room")},
    )
    frs: dict[str, Any] = {
        "p": lambda k: {"type": "length", "length": 1},
        "ph": lambda k: {"type": "length", "length": 0},
        "stop": lambda k: {"type": "stop", "matched": 151329},
        "len": lambda k: {"type": "length", "length": int(t_slots["C"][k])},
        "abort": lambda k: {"type": "abort", "message": "Aborted by AbortReq."},
    }

    def fin(fr: str, hdr: bool) -> list[tuple[str, Any]]:
        def render(k: int) -> str:
            ts = t_slots
            return sglang_lines.finished(
                ts["rid"][k],
                ts["host"][k],
                int(ts["room"][k]),
                frs[fr](k),
                int(ts["P"][k]),
                int(ts["C"][k]),
                int(ts["K"][k]),
                float(ts["E"][k]),
                ts["rq"][k] if hdr else None,
            )

        return split_template(render, t_slots)

    cols_rts = ["rid_hi", "rid_lo", "room", "L", "C", "d1", "d2", "d3", "d4", "st", "M"]
    cols_text = ["rid_hi", "rid_lo", "room", "host", "P", "C", "K", "E", "rq"]
    for n in range(b.NN):
        role = b.specs[n].role
        if role == "prefill":
            b.prog["rts_p", n] = b.engine_prog(n, rts_p, base, cols_rts)
            b.prog["over", n] = b.engine_prog(n, over, base, cols_rts)
        else:
            b.prog["rts_d", n] = b.engine_prog(n, rts_d, base, cols_rts)
            b.prog["fail", n] = b.engine_prog(n, fail, base, cols_rts)
        if n in b.text_nodes:
            b.prog["recv", n] = b.engine_prog(n, recv, text_slots, cols_text, prefixed=False)
            for fr in ("p", "ph") if role == "prefill" else ("stop", "len", "abort"):
                for hdr in (False, True):
                    b.prog["fin", n, fr, hdr] = b.engine_prog(n, fin(fr, hdr), text_slots, cols_text, prefixed=False)
    _batch(b, rel)


def _batch(b: Bundle, rel: str) -> None:
    """Decode batch / Prefill batch lines of batch_lines.decode_line and prefill_line (sentinel renders)."""
    dv: list[tuple[Any, ...]] = [
        (7100001, 7200002, 7300.03, 7400.04, 7500005, 7600006, 7700007, 7800.08, 7900009),
        (8100001, 8200002, 8300.03, 8400.04, 8500005, 8600006, 8700007, 8800.08, 8900009),
    ]
    dn = ["running", "used", "usage", "pusage", "prealloc", "transfer", "queue", "gen", "it"]

    def dline(k: int) -> str:
        v = dict(zip(dn, dv[k], strict=True))
        return decode_line(
            rel,
            v["it"],
            v["running"],
            v["used"],
            v["usage"],
            v["pusage"],
            v["prealloc"],
            v["transfer"],
            v["queue"],
            v["gen"],
        )

    def txt(v: float | int) -> str:
        return f"{v:.2f}" if isinstance(v, float) else str(v)

    d_parts = split_template(dline, {n: (txt(dv[0][i]), txt(dv[1][i])) for i, n in enumerate(dn)})
    pv: list[tuple[Any, ...]] = [
        (6100001, 6200002, 6300003, 6400.04, 6500005, 6600006, 6700007, 6800.08, 6900009),
        (5100001, 5200002, 5300003, 5400.04, 5500005, 5600006, 5700007, 5800.08, 5900009),
    ]
    pn = ["new", "cached", "used", "usage", "queue", "boot", "inflight", "thr", "it"]

    def pline(k: int) -> str:
        v = dict(zip(pn, pv[k], strict=True))
        return prefill_line(
            rel,
            v["it"],
            v["new"],
            v["cached"],
            v["used"],
            v["usage"],
            v["queue"],
            v["boot"],
            v["inflight"],
            v["thr"],
        )

    p_parts = split_template(pline, {n: (txt(pv[0][i]), txt(pv[1][i])) for i, n in enumerate(pn)})
    slots = {n: [(FIX, n, 2)] if n in ("usage", "pusage", "gen", "thr") else [(INT, n, 0)] for n in dn + pn}
    for n in range(b.NN):
        if b.specs[n].role == "decode":
            b.prog["dbatch", n] = b.engine_prog(n, d_parts, slots, dn)
        else:
            b.prog["pbatch", n] = b.engine_prog(n, p_parts, slots, pn)
