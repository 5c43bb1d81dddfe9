"""The scale generator's renderer: a line is a program of ops over one row of an int64 matrix, compiled
(numba), so no line goes through Python. A program is split out of a render of the line's own writer
with sentinel values (split_template): the template holds the writer's literals, never a copy of them.

Ops: LIT (a pool entry), TAB (a pool entry named by a column), INT (decimal, zero-padded to b), FIX (a
count of 10^-b as a fixed-point number), REPR (the same as Python's repr of round(x, b)), HEX (b hex
digits), UUID (a UUID4 from two columns), TS (a time in microseconds in one of the TS_* forms)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
from numba import njit

# ------------------------------------------------------------------------------------------------
# The renderer: a line is a program of ops over one row of an int64 matrix (see Lines)

LIT, TAB, INT, FIX, REPR, HEX, UUID, TS = range(8)
TS_LOG, TS_LOG_MS, TS_ISO_US, TS_ISO_MS_Z, TS_PG = range(5)
TS_LEN = (19, 23, 26, 24, 23)
HEXD = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


POW10 = np.array([10**i for i in range(20)], dtype=np.uint64)


@njit(cache=True, error_model="numpy")
def _put_int(buf: np.ndarray, p: int, v: int, width: int) -> int:
    """v >= 0 in decimal, zero-padded to width."""
    u = np.uint64(v)
    n = 1
    while n < 20 and u >= POW10[n]:
        n += 1
    if width > n:
        n = width
    ten = np.uint64(10)
    for i in range(n - 1, -1, -1):
        q = u // ten
        buf[p + i] = np.uint8(48 + (u - q * ten))
        u = q
    return p + n


@njit(cache=True, error_model="numpy")
def _put_hex(buf: np.ndarray, p: int, v: Any, digits: int) -> int:
    for i in range(digits - 1, -1, -1):
        buf[p + i] = HEXD[np.int64(v & np.uint64(15))]
        v = v >> np.uint64(4)
    return p + digits


@njit(cache=True, error_model="numpy")
def _civil(days: int) -> tuple[int, int, int]:
    """(year, month, day) of a day number since 1970-01-01 (H. Hinnant's days_from_civil, inverted)."""
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    return (y + 1 if m <= 2 else y), m, d


@njit(cache=True, error_model="numpy")
def _put_ts(buf: np.ndarray, p: int, us: int, kind: int, dday: np.ndarray, dcache: np.ndarray) -> int:
    """writer.log_ts (ms truncated), iso_us, iso_ms_z and spendlogs.pg_ts (ms rounded, zeros dropped).
    dday[0], dcache: the last day printed and its bytes, so a date is computed once per day."""
    if kind == 4:
        ms_total = (us + 500) // 1000
        sec, frac = ms_total // 1000, ms_total % 1000
    else:
        sec, frac = us // 1_000_000, us % 1_000_000
    days, sod = sec // 86400, sec % 86400
    if dday[0] != days:
        y, m, d = _civil(days)
        dday[0] = days
        q = 0
        for v, w in ((y, 4), (m, 2), (d, 2)):
            for i in range(w - 1, -1, -1):
                dcache[q + i] = np.uint8(48 + v % 10)
                v //= 10
            q += w
    buf[p : p + 4] = dcache[0:4]
    buf[p + 4] = 45
    buf[p + 5 : p + 7] = dcache[4:6]
    buf[p + 7] = 45
    buf[p + 8 : p + 10] = dcache[6:8]
    p += 10
    buf[p] = 84 if kind == 2 or kind == 3 else 32
    p = _put_int(buf, p + 1, sod // 3600, 2)
    buf[p] = 58
    p = _put_int(buf, p + 1, (sod // 60) % 60, 2)
    buf[p] = 58
    p = _put_int(buf, p + 1, sod % 60, 2)
    if kind == 1 or kind == 3:
        buf[p] = 46
        p = _put_int(buf, p + 1, frac // 1000, 3)
        if kind == 3:
            buf[p] = 90
            p += 1
    elif kind == 2:
        buf[p] = 46
        p = _put_int(buf, p + 1, frac, 6)
    elif kind == 4 and frac:
        buf[p] = 46
        n = 3
        while frac % 10 == 0:
            frac //= 10
            n -= 1
        p = _put_int(buf, p + 1, frac, n)
    return p


@njit(cache=True, error_model="numpy")
def _render(
    M: np.ndarray,
    ops: np.ndarray,
    pstart: np.ndarray,
    pend: np.ndarray,
    pdata: np.ndarray,
    poff: np.ndarray,
    buf: np.ndarray,
    off: np.ndarray,
) -> None:
    """Render every row of M (column 3: its program) into buf; off[i]..off[i+1] is row i's line."""
    p = 0
    dday = np.full(1, -(1 << 40), dtype=np.int64)
    dcache = np.zeros(8, dtype=np.uint8)
    for i in range(M.shape[0]):
        off[i] = p
        prog = M[i, 3]
        for o in range(pstart[prog], pend[prog]):
            k, a, b = ops[o, 0], ops[o, 1], ops[o, 2]
            if k == 0 or k == 1:
                e = a if k == 0 else M[i, a]
                ln = poff[e + 1] - poff[e]
                buf[p : p + ln] = pdata[poff[e] : poff[e + 1]]
                p += ln
            elif k == 2:
                p = _put_int(buf, p, M[i, a], b)
            elif k == 3 or k == 4:
                v = M[i, a]
                q = 10**b
                p = _put_int(buf, p, v // q, 0)
                buf[p] = 46
                f = v % q
                n = b
                if k == 4:  # Python's repr of round(x, b): trailing zeros dropped, one digit kept
                    if f == 0:
                        n = 1
                    else:
                        while f % 10 == 0:
                            f //= 10
                            n -= 1
                p = _put_int(buf, p + 1, f, n)
            elif k == 5:
                p = _put_hex(buf, p, np.uint64(M[i, a]), b)
            elif k == 6:  # a UUID4 from two 64-bit draws (version and variant bits set)
                hi = (np.uint64(M[i, a]) & np.uint64(0xFFFFFFFFFFFF0FFF)) | np.uint64(0x4000)
                lo = (np.uint64(M[i, a + 1]) & np.uint64(0x3FFFFFFFFFFFFFFF)) | np.uint64(0x8000000000000000)
                p = _put_hex(buf, p, hi >> np.uint64(32), 8)
                buf[p] = 45
                p = _put_hex(buf, p + 1, (hi >> np.uint64(16)) & np.uint64(0xFFFF), 4)
                buf[p] = 45
                p = _put_hex(buf, p + 1, hi & np.uint64(0xFFFF), 4)
                buf[p] = 45
                p = _put_hex(buf, p + 1, lo >> np.uint64(48), 4)
                buf[p] = 45
                p = _put_hex(buf, p + 1, lo & np.uint64(0xFFFFFFFFFFFF), 12)
            else:
                p = _put_ts(buf, p, M[i, a], b, dday, dcache)
    off[M.shape[0]] = p


class Pool:
    """Every literal and table entry, as one byte buffer."""

    def __init__(self) -> None:
        self.items: list[bytes] = []
        self.index: dict[bytes, int] = {}
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None

    def add(self, text: str) -> int:
        b = text.encode()
        if b not in self.index:
            self.index[b] = len(self.items)
            self.items.append(b)
            self._arrays = None
        return self.index[b]

    def table(self, texts: list[str]) -> np.ndarray:
        return np.array([self.add(t) for t in texts], dtype=np.int64)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if self._arrays is None:
            off = np.zeros(len(self.items) + 1, dtype=np.int64)
            off[1:] = np.cumsum([len(b) for b in self.items])
            self._arrays = (np.frombuffer(b"".join(self.items), dtype=np.uint8).copy(), off)
        return self._arrays


# A slot's ops: (kind, column name, arg); a table slot also names its table (for the length bound)
Op = tuple[int, str, int]


class Programs:
    """Compiled templates: ops rows (kind, a, b) and each program's range and length bound."""

    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self.ops: list[tuple[int, int, int]] = []
        self.ranges: list[tuple[int, int]] = []
        self.bounds: list[int] = []
        self.table_max: dict[str, int] = {}

    def add(self, parts: list[tuple[str, Any]], slots: dict[str, list[Op]], cols: dict[str, int]) -> int:
        start, bound = len(self.ops), 0
        for kind, v in parts:
            if kind == "lit":
                self.ops.append((LIT, self.pool.add(v), 0))
                bound += len(v.encode())
                continue
            for op, col, arg in slots[v]:
                if op == LIT:
                    self.ops.append((LIT, self.pool.add(col), 0))
                    bound += len(col.encode())
                    continue
                self.ops.append((op, cols[col], arg))
                bound += {TAB: self.table_max.get(col, 0), INT: 20, FIX: 22, REPR: 22, HEX: arg, UUID: 36}.get(
                    op, TS_LEN[arg] if op == TS else 0
                )
        self.ranges.append((start, len(self.ops)))
        self.bounds.append(bound)
        return len(self.ranges) - 1

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        ops = np.array(self.ops, dtype=np.int64).reshape(-1, 3)
        r = np.array(self.ranges, dtype=np.int64).reshape(-1, 2)
        return ops, r[:, 0].copy(), r[:, 1].copy(), np.array(self.bounds, dtype=np.int64)


def split_template(render: Callable[[int], str], slots: dict[str, tuple[str, str]]) -> list[tuple[str, Any]]:
    """render(0) split at the sentinel texts slots[name][0] into literals and slot names; render(1)
    must be the same literals with slots[name][1] in the slots (else some field varies that no slot
    covers, or a sentinel's text also occurs as literal text: ValueError)."""
    a, b = render(0), render(1)
    present = {v[0]: n for n, v in slots.items() if v[0] in a}
    parts: list[tuple[str, Any]] = []
    i = 0
    if present:
        pat = re.compile("|".join(re.escape(t) for t in sorted(present, key=len, reverse=True)))
        for m in pat.finditer(a):
            if m.start() > i:
                parts.append(("lit", a[i : m.start()]))
            parts.append(("slot", present[m.group()]))
            i = m.end()
    if i < len(a):
        parts.append(("lit", a[i:]))
    rebuilt = "".join(v if k == "lit" else slots[v][1] for k, v in parts)
    if rebuilt != b:
        j = next((k for k, (x, y) in enumerate(zip(rebuilt, b, strict=False)) if x != y), min(len(b), len(rebuilt)))
        raise ValueError(
            f"template does not rebuild the second render at {j}: {rebuilt[j - 40 : j + 40]!r} vs "
            f"{b[j - 40 : j + 40]!r}"
        )
    return parts


def sub_slots(parts: list[tuple[str, Any]], name: str, inner: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """parts with slot `name` replaced by the parts `inner` (a message inside its record prefix)."""
    out: list[tuple[str, Any]] = []
    for k, v in parts:
        out.extend(inner if (k, v) == ("slot", name) else [(k, v)])
    return out


# ------------------------------------------------------------------------------------------------
# Vectorized number formats and id mixing (the printed values; the renderer prints them)
