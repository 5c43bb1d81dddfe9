"""Watch, following: the engine logs of a folder laid out like a bundle (engine/<node>/*.log, *.jsonl;
pages/*.jsonl), read as they grow.

Each file is followed by its inode and the offset after its last whole line (a line still being
written waits for its newline). A file renamed away (logrotate: server.log -> server.log.1) is read to
its end through the handle still open on it before the new file at the path is read from its start;
a file cut shorter than the offset (copytruncate) is read again from its start. New nodes and files are
picked up at every poll. The offsets go into the state file, so a restarted watcher goes on where it
stopped; a file rotated while it was down is found again by its inode among the rotated names.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

CHUNK = 1 << 20


@dataclass
class Followed:
    rel: str
    node: str
    source: str  # log | jsonl | pages
    inode: int = 0
    offset: int = 0  # after the last whole line read
    line: int = 0  # lines read so far from this inode
    fh: IO[bytes] | None = field(default=None, repr=False)
    tail: bytes = b""  # a line without its newline yet

    def state(self) -> dict[str, Any]:
        return {"node": self.node, "source": self.source, "inode": self.inode, "offset": self.offset, "line": self.line}


class Follower:
    def __init__(self, root: Path, pages: bool = True) -> None:
        self.root = root
        self.pages = pages
        self.files: dict[str, Followed] = {}
        self.notes: list[str] = []  # rotations, truncations, files not read: said on stderr by the caller
        self.ignored: set[str] = set()  # the files and folders said once to be ignored

    def load(self, data: dict[str, Any]) -> None:
        for rel, s in data.items():
            self.files[rel] = Followed(rel, s["node"], s["source"], s["inode"], s["offset"], s["line"])

    def dump(self) -> dict[str, Any]:
        return {rel: f.state() for rel, f in sorted(self.files.items())}

    def _discover(self) -> None:
        engine = self.root / "engine"
        found: list[tuple[Path, str, str]] = []
        skipped: list[tuple[Path, str]] = []
        if engine.is_dir():
            for d in sorted(engine.iterdir()):
                if not d.is_dir():
                    skipped.append((d, "not in an engine/<node>/ folder"))
                    continue
                entries = sorted(d.iterdir())
                live = {p.name for p in entries if p.name.endswith((".log", ".jsonl"))}
                for p in entries:
                    if p.name.endswith(".log"):
                        found.append((p, d.name, "log"))
                    elif p.name.endswith(".jsonl"):
                        found.append((p, d.name, "jsonl"))
                    elif p.is_dir():
                        skipped.append((p, "a folder inside a node folder (watch reads engine/<node>/*.log, *.jsonl)"))
                    elif any(p.name.startswith(n + ".") for n in live):
                        skipped.append((p, "a rotated part of a log: watch follows the live file from where it is"))
                    else:
                        skipped.append((p, "not a .log or .jsonl engine log"))
        if not engine.is_dir() and "engine/" not in self.ignored:
            self.ignored.add("engine/")  # said once; the folder may appear when the cluster starts
            self.notes.append("no engine/ folder (yet): waiting for engine/<node>/*.log, *.jsonl")
        pages = self.root / "pages"
        if pages.is_dir():
            for p in sorted(pages.iterdir()):
                if self.pages and p.is_file() and p.name.endswith(".jsonl"):
                    found.append((p, p.stem, "pages"))
                elif not self.pages:
                    skipped.append((p, "--no-pages"))
                else:
                    skipped.append(
                        (p, "watch follows JSONL page events (pages/*.jsonl) only; investigate reads the rest")
                    )
        gateway = self.root / "gateway"
        if gateway.is_dir():
            why = "watch reads no gateway folder (investigate does; --gateway FILE names the alerted rooms' requests)"
            skipped.append((gateway, why))
        for p, node, source in found:
            rel = str(p.relative_to(self.root))
            if rel not in self.files:
                self.files[rel] = Followed(rel, node, source)
        for p, why in skipped:
            rel = str(p.relative_to(self.root)) + ("/" if p.is_dir() else "")
            if rel not in self.ignored:
                self.ignored.add(rel)
                self.notes.append(f"ignored {rel}: {why}")

    def poll(self) -> Iterator[tuple[Followed, int, bytes]]:
        """Every whole line written since the last poll: (file, line number, bytes with newline)."""
        for f, before, data in self.poll_chunks():
            for i, line in enumerate(data.splitlines(keepends=True), start=before + 1):
                yield f, i, line

    def poll_chunks(self) -> Iterator[tuple[Followed, int, bytes]]:
        """What was written since the last poll, as runs of whole lines: (file, lines before the run,
        the run's bytes, ending in a newline). A caller that wants few of the lines finds them in the
        run without a Python step per line."""
        self._discover()
        for f in list(self.files.values()):
            yield from self._read(f)

    def _open(self, f: Followed) -> bool:
        path = self.root / f.rel
        try:
            st = path.stat()
        except FileNotFoundError:
            return False
        if f.fh is None and f.inode and st.st_ino != f.inode:
            # rotated while we were away: finish the old inode first, if a rotated name still holds it
            for old in sorted(path.parent.glob(path.name + ".*")):
                try:
                    if old.stat().st_ino == f.inode:
                        f.fh = old.open("rb")
                        f.fh.seek(f.offset)
                        self.notes.append(f"{f.rel}: rotated while the watcher was stopped; reading {old.name} first")
                        return True
                except OSError:
                    continue
            self.notes.append(f"{f.rel}: rotated while the watcher was stopped and the old file is gone")
            f.inode, f.offset, f.line = 0, 0, 0
        if f.fh is None:
            f.fh = path.open("rb")
            if f.inode == st.st_ino and f.offset <= st.st_size:
                f.fh.seek(f.offset)
            else:
                f.inode, f.offset, f.line, f.tail = st.st_ino, 0, 0, b""
        return True

    def _read(self, f: Followed) -> Iterator[tuple[Followed, int, bytes]]:
        if f.fh is None and not self._open(f):
            return
        assert f.fh is not None
        while True:
            yield from self._drain(f)
            # the path may now name another file (rotation) or a shorter one (truncation)
            try:
                st = (self.root / f.rel).stat()
            except FileNotFoundError:
                return
            if st.st_ino != f.inode:
                if f.tail:  # the last line of the rotated file, without its newline: it is whole now
                    f.line += 1
                    f.offset += len(f.tail)
                    yield f, f.line - 1, f.tail + b"\n"
                self.notes.append(f"{f.rel}: rotated; following the new file")
                f.fh.close()
                f.fh = (self.root / f.rel).open("rb")
                f.inode, f.offset, f.line, f.tail = st.st_ino, 0, 0, b""
                continue
            if st.st_size < f.offset:
                self.notes.append(f"{f.rel}: truncated; reading it again from the start")
                f.fh.seek(0)
                f.offset, f.line, f.tail = 0, 0, b""
                continue
            return

    def _drain(self, f: Followed) -> Iterator[tuple[Followed, int, bytes]]:
        assert f.fh is not None
        while chunk := f.fh.read(CHUNK):
            data = f.tail + chunk
            cut = data.rfind(b"\n")
            if cut < 0:
                f.tail = data
                continue
            f.tail = data[cut + 1 :]
            run = data[: cut + 1]
            before = f.line
            f.line += run.count(b"\n")
            f.offset += len(run)
            yield f, before, run

    def close(self) -> None:
        for f in self.files.values():
            if f.fh is not None:
                f.fh.close()
                f.fh = None


def lag_bytes(follower: Follower) -> int:
    """Bytes written to the followed files and not read yet (the metric kvf_watch_lag_bytes)."""
    total = 0
    for f in follower.files.values():
        try:
            total += max(0, os.stat(follower.root / f.rel).st_size - f.offset)
        except OSError:
            continue
    return total
