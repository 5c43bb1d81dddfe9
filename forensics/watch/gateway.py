"""Watch, the gateway side (`watch --gateway FILE`): a gateway log in the spec's JSONL format, read as
it grows, maps each room its records name (`bootstrap_room`) to the gateway's request id and account,
so that an alert says whose request it is. Records without a room name nothing (real gateways rarely
log it: investigate joins those through the engines' request logs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CHUNK = 1 << 20


class GatewayRooms:
    """room -> (request_id, account_id), from the records read so far. The file is read from its start
    at every start of the watcher (its map is not in the state file): one file, read in seconds."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rooms: dict[int, tuple[str | None, str | None]] = {}
        self.notes: list[str] = []  # rows that cannot be used: said on stderr by the caller
        self.offset = 0
        self.line = 0
        self.inode = 0
        self.tail = b""

    def poll(self) -> int:
        """Read the records written since the last poll; returns the lines read. `offset` is where the
        unread part starts: a last line without its newline is kept (`tail`) until it is whole."""
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return 0
        if st.st_ino != self.inode or st.st_size < self.offset + len(self.tail):  # rotated or truncated
            self.inode, self.offset, self.line, self.tail = st.st_ino, 0, 0, b""
        n = 0
        with self.path.open("rb") as fh:
            fh.seek(self.offset + len(self.tail))
            while chunk := fh.read(CHUNK):
                data = self.tail + chunk
                whole = data.rfind(b"\n") + 1
                self.tail = data[whole:]
                self.offset += whole
                for raw in data[:whole].splitlines():
                    self.line += 1
                    n += 1
                    self._record(raw)
        return n

    def _record(self, raw: bytes) -> None:
        if not raw.strip():
            return
        where = f"gateway {self.path} line {self.line}"
        try:
            rec = json.loads(raw)
        except ValueError:
            self.notes.append(f"{where}: not JSON; skipped")
            return
        if not isinstance(rec, dict):
            self.notes.append(f"{where}: not a JSON object; skipped")
            return
        room = rec.get("bootstrap_room")
        if room is None:
            return
        if isinstance(room, str) and room.strip().isdigit():
            room = int(room)
        if not isinstance(room, int) or isinstance(room, bool):
            self.notes.append(f"{where}: bootstrap_room {room!r} is not an integer; skipped")
            return
        rid, account = rec.get("request_id"), rec.get("account_id")
        # the first record of a room names it: a retry logged again under the same room changes nothing
        self.rooms.setdefault(room, (_text(rid), _text(account)))

    def name(self, room: int | None) -> dict[str, Any]:
        """The gateway's request id and account of `room` (None each when no record names it yet)."""
        rid, account = self.rooms.get(room, (None, None)) if room is not None else (None, None)
        return {"gateway_request_id": rid, "account_id": account}


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
