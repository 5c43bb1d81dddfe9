"""The scale generator's files: each stream's lines rendered in blocks and written to the file of their
day (the rotation's names: templates.Bundle.path), one day's file open per stream at a time; the line
and byte counts of every file."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from forensics.gateway_formats import litellm_spendlogs as spendlogs
from forensics.simulate.scale.options import DAY
from forensics.simulate.scale.render import _render
from forensics.simulate.scale.templates import engine_files

if TYPE_CHECKING:
    from forensics.simulate.scale.templates import Bundle


class Out:
    """Open files per stream (one day at a time), line and byte counts per file."""

    def __init__(self, b: Bundle, root: Path) -> None:
        self.b, self.root = b, root
        self.open: dict[int, tuple[str, Any, Any]] = {}
        self.lines: dict[str, int] = {}
        self.bytes = 0
        self.out = np.empty(1 << 24, dtype=np.uint8)
        for n in range(b.NN):  # the start-up lines open each node's first file
            text = engine_files(b.cfg, b.specs[n], [], [], None)[0].encode()
            if (f := self.fh(n, 0)) is not None:
                f.write(text)
            self.lines[b.path(n, 0)] += text.count(b"\n")
            self.bytes += len(text)

    def fh(self, s: int, day: int) -> Any:
        path = self.b.path(s, day)
        self.lines.setdefault(path, 0)
        if self.b.a.no_write:
            if s == 2 * self.b.NN and self.lines[path] == 0:
                self.lines[path] = 1
            return None
        cur = self.open.get(s)
        if cur is not None and cur[0] == path:
            return cur[1]
        if cur is not None:
            cur[1].close()
            cur[2].close()
        p = self.root / path
        p.parent.mkdir(parents=True, exist_ok=True)
        raw = f = p.open("wb")
        if path.endswith(".gz"):  # no name and no time in the header: the same bytes run after run
            f = gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=1, mtime=0)  # type: ignore[assignment]
        self.open[s] = (path, f, raw)
        self.lines.setdefault(path, 0)
        if s == 2 * self.b.NN and self.lines[path] == 0:
            f.write((",".join(spendlogs.SPENDLOGS_COLUMNS) + "\n").encode())
            self.lines[path] += 1
        return f

    def write(self, M: np.ndarray, order: np.ndarray, block: int = 250_000) -> None:
        """Rows M[order] (sorted by stream and time): rendered in blocks and written to each row's file."""
        b = self.b
        ops, ps, pe, bounds = b.progs.arrays()
        pdata, poff = b.pool.arrays()
        for a in range(0, len(order), block):
            sub = M[order[a : a + block]]
            day = np.clip((sub[:, 1] - b.cfg.start_us) // DAY, 0, b.a.days - 1)
            k = sub[:, 0] * 1000 + np.where(sub[:, 0] == 2 * b.NN, 0, day)
            cap = int(bounds[sub[:, 3]].sum())
            if len(self.out) < cap:
                self.out = np.empty(int(cap * 1.25), dtype=np.uint8)
            off = np.empty(len(sub) + 1, dtype=np.int64)
            _render(sub, ops, ps, pe, pdata, poff, self.out, off)
            cut = np.r_[0, np.flatnonzero(k[1:] != k[:-1]) + 1, len(k)]
            for i, j in zip(cut[:-1], cut[1:], strict=True):
                s, d = int(sub[i, 0]), int(k[i] % 1000)
                f = self.fh(s, d)
                if f is not None:
                    f.write(self.out[off[i] : off[j]].data)
                self.lines[b.path(s, d)] += int(j - i)
            self.bytes += int(off[-1])

    def close(self) -> None:
        for _, f, raw in self.open.values():
            f.close()
            raw.close()

    def render(self, M: np.ndarray) -> bytes:
        """The lines of rows M, in their order (a file of its own: the truth)."""
        ops, ps, pe, bounds = self.b.progs.arrays()
        pdata, poff = self.b.pool.arrays()
        cap = int(bounds[M[:, 3]].sum())
        if len(self.out) < cap:
            self.out = np.empty(int(cap * 1.25), dtype=np.uint8)
        off = np.empty(len(M) + 1, dtype=np.int64)
        _render(M, ops, ps, pe, pdata, poff, self.out, off)
        return bytes(self.out[: off[-1]])
