"""The live replay's writer (forensics.simulate.live): one target file on an unbuffered O_APPEND
descriptor, written a tick's lines at a time, its line count and its rotations (server.log to
server.log.1, as logrotate's `rotate 1`)."""

from __future__ import annotations

import json
import os
from pathlib import Path


class RotatingOut:
    """One target file: an unbuffered O_APPEND descriptor, its line count, its rotations."""

    def __init__(self, root: Path, rel: str, rotate_every: int | None) -> None:
        self.path = root / rel
        self.rel = rel
        self.rotate_every = rotate_every if rel.endswith("server.log") else None
        self.fd = -1
        self.n = 0  # lines in the current file
        self.total = 0
        self.rotations = 0
        self.text = rel.endswith("server.log")
        self.rel_json = json.dumps(rel)

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def _write(self, buf: bytes) -> None:
        k = os.write(self.fd, buf)
        if k < len(buf):  # a short write (a signal, a full disk): write the rest
            view = memoryview(buf)[k:]
            while view:
                view = view[os.write(self.fd, view) :]

    def write(self, lines: list[bytes]) -> int:
        """Write lines in one call per part between rotations (rotating first where due); returns the first
        line's 1-based number in its file (the next ones follow, restarting at 1 after a rotation)."""
        if self.fd < 0:
            self._open()
        first, i = 0, 0
        while i < len(lines):
            k = len(lines) - i
            if self.rotate_every is not None:
                if self.n >= self.rotate_every:
                    os.close(self.fd)
                    os.replace(self.path, self.path.with_name(self.path.name + ".1"))
                    self._open()
                    self.n, self.rotations = 0, self.rotations + 1
                k = min(k, self.rotate_every - self.n)
            self._write(lines[i] if k == 1 else b"".join(lines[i : i + k]))
            first = first or self.n + 1
            self.n += k
            self.total += k
            i += k
        return first

    def numbers(self, first: int, count: int) -> list[int]:
        """The line numbers of `count` lines written from line `first` on (rotations restart at 1)."""
        if self.rotate_every is None:
            return list(range(first, first + count))
        return [(first - 1 + j) % self.rotate_every + 1 for j in range(count)]

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
