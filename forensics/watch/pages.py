"""Watch, page events (pages/*.jsonl, spec section 4) as they are written: a read of slots whose last
write was another room's (stale content), or a transfer landing in slots another room has bound for
reading (a foreign write), raises an `exposure` alert.

This is the live alarm, not the finding: it orders events as they arrive (one node's file is in seq
order; across nodes, in the order the lines reach the watcher), where investigate orders them by seq
and by the clock bounds. Every alert says so; `forensics investigate` settles it. Slots are held per
node in numpy arrays grown to the largest slot seen (8 bytes per slot for the writer, 8 for the reader).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from forensics.watch import chunks
from forensics.watch.alerts import Alert

NONE = -1
# a page event as forensics.simulate's writer lays it out (spec section 4; json.dumps: `, ` and `: `), its
# strings printable ASCII without quotes or escapes, its numbers integers: the fields json.loads gives
_S = rb'"([ !#-\[\]-~]*+)"'
_I = rb"(-?(?:0|[1-9][0-9]*+))"
PAGE_LINE = re.compile(
    rb'^\{"node": ' + _S + rb', "seq": -?(?:0|[1-9][0-9]*+), "ts": ' + _S + rb', "op": ' + _S + rb', "room": ' + _I
    + rb', "start": ' + _I + rb', "end": ' + _I + rb'(?:, "src": ' + _S + rb')?(?:, "peer": ' + _S + rb")?\}$",
    re.M,
)  # fmt: skip


def _ev(path: str, lineno: int, raw: bytes) -> dict[str, Any]:
    return {"file": path, "line": lineno, "text": raw.decode("utf-8", "replace").rstrip()[:500]}


class PageWatch:
    def __init__(self) -> None:
        self.writer: dict[str, np.ndarray] = {}
        self.reader: dict[str, np.ndarray] = {}
        self.alerted: set[str] = set()

    def dump(self) -> dict[str, Any]:
        return {"alerted": sorted(self.alerted)}

    def load(self, data: dict[str, Any]) -> None:
        self.alerted = set(data.get("alerted", []))

    def save_maps(self, path: Path) -> None:
        """The slot maps beside the state file (they are large: an .npz, saved with the offsets)."""
        if not self.writer:
            return
        tmp = path.with_name(path.name + ".tmp.npz")
        arrays = {f"w/{n}": a for n, a in self.writer.items()} | {f"r/{n}": a for n, a in self.reader.items()}
        np.savez(tmp, **arrays)  # type: ignore[arg-type]
        os.replace(tmp, path)

    def load_maps(self, path: Path) -> None:
        if not path.exists():
            return
        with np.load(path) as z:
            for key in z.files:
                kind, node = key.split("/", 1)
                (self.writer if kind == "w" else self.reader)[node] = z[key]

    def _arrays(self, node: str, end: int) -> tuple[np.ndarray, np.ndarray]:
        w = self.writer.get(node)
        if w is None or len(w) < end:
            size = max(end, 2 * (len(w) if w is not None else 0), 1 << 16)
            nw = np.full(size, NONE, np.int64)
            nr = np.full(size, NONE, np.int64)
            if w is not None:
                nw[: len(w)] = w
                nr[: len(w)] = self.reader[node]
            self.writer[node], self.reader[node] = nw, nr
        return self.writer[node], self.reader[node]

    def feed(self, path: str, lineno: int, raw: bytes) -> list[Alert]:
        try:
            e = json.loads(raw)
            node, op, room, a, b = e["node"], e["op"], int(e["room"]), int(e["start"]), int(e["end"])
        except (ValueError, KeyError, TypeError):
            return []  # investigate's ingest names bad rows; the alarm skips them
        return self._event(path, lineno, raw, node, op, room, a, b, e.get("peer"), e.get("ts"), e.get("src"))

    def feed_chunk(self, path: str, before: int, data: bytes) -> list[Alert]:
        """A run of whole lines (`before` lines precede it): the events of the writer's layout (PAGE_LINE)
        read in bulk, any other line through feed (KVF_WATCH_READER=python: every line)."""
        out: list[Alert] = []
        if chunks.READER == "python":
            for lineno, raw in enumerate(data.splitlines(keepends=True), start=before + 1):
                out += self.feed(path, lineno, raw)
            return out
        line, pos = before, 0
        for m in PAGE_LINE.finditer(data):
            start = m.start()
            if start != pos:  # lines the pattern did not take
                for raw in data[pos:start].splitlines(keepends=True):
                    line += 1
                    out += self.feed(path, line, raw)
            line += 1
            pos = m.end() + 1
            node, ts, op, room, a, b, src, peer = m.groups()
            out += self._event(
                path, line, data[start:pos], node.decode(), op.decode(), int(room), int(a), int(b),
                peer.decode() if peer is not None else None, ts.decode(), src.decode() if src is not None else None,
            )  # fmt: skip
        for raw in data[pos:].splitlines(keepends=True):
            line += 1
            out += self.feed(path, line, raw)
        return out

    def _event(
        self,
        path: str,
        lineno: int,
        raw: bytes,
        node: Any,
        op: Any,
        room: int,
        a: int,
        b: int,
        peer: Any,
        ts: Any,
        src: Any = None,
    ) -> list[Alert]:
        if not (0 <= a < b):
            return []
        if op == "transfer" and src:
            # a send, a failed room or its conclusion (the plugin's src sent / failed / concluded,
            # docs/evidence-bundle.md section 4): no landing, so nothing written to alert on; investigate
            # weighs what such a send may have written
            return []
        target = peer if op == "transfer" else node
        if not isinstance(target, str):
            return []
        w, r = self._arrays(target, b)
        if op == "write":
            w[a:b] = room
        elif op == "free":
            r[a:b] = NONE
        elif op == "share":
            r[a:b] = room
        elif op == "read":
            r[a:b] = room
            foreign = w[a:b][(w[a:b] != room) & (w[a:b] != NONE)]
            if foreign.size:
                return self._alert(
                    node, room, "stale", np.unique(foreign), int(foreign.size), _ev(path, lineno, raw), ts
                )
        elif op == "transfer":
            w[a:b] = room
            held = r[a:b][(r[a:b] != room) & (r[a:b] != NONE)]
            if held.size:  # the lowest holder; the others' reads of these slots see the write as stale
                holder = int(held.min())
                hit = int((held == holder).sum())
                return self._alert(target, holder, "foreign_write", np.array([room]), hit, _ev(path, lineno, raw), ts)
        return []

    def _alert(
        self, node: str, room: int, how: str, sources: np.ndarray, slots: int, ev: dict[str, Any], ts: Any
    ) -> list[Alert]:
        key = f"exposure\t{room}"
        if key in self.alerted:
            return []
        self.alerted.add(key)
        src = ", ".join(str(s) for s in sources.tolist()[:10])
        return [
            Alert(
                "exposure", node, room, [], [ev], str(ts) if ts is not None else None,
                summary=f"room {room} on {node}: {slots} slots held another room's KV ({how}; rooms {src}) as the "
                "events arrived; forensics investigate orders them by seq and clock bounds and settles it",
            )
        ]  # fmt: skip
