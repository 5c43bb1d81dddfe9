"""The live replay's line sources (forensics.simulate.live): the files of a bundle it replays, each
file's lines with their log times (naive ones in the bundle's [engine] log_timezone) and the due time
each line is written at (the running maximum of its file's log times; STARTUP for the start-up lines at
the head of a server.log, written at once)."""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

STARTUP_MARKERS = (b"server_args=", b"Load weight", b"KV Cache is allocated", b"max_total_num_tokens=")
TEXT_TS = re.compile(rb"\[(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)(?:[.,](\d{1,6}))?[ \]]")
JSON_TS = {  # the first key of the simulator's (and SGLang's) records: read without a JSON parse
    "requests": re.compile(rb'\{"timestamp": ?"([^"\\]+)"'),
    "pages": re.compile(rb'\{"node": ?"[^"\\]*", ?"seq": ?-?\d+, ?"ts": ?"([^"\\]+)"'),
}
JSON_KEY = {"requests": "timestamp", "pages": "ts"}
STARTUP = -1  # due time of start-up lines: before any log time (log times are positive epoch µs)


class Clock:
    """Log time strings -> epoch µs, naive ones in the bundle's log zone (cached per second)."""

    def __init__(self, zone: str) -> None:
        try:
            self.tz = UTC if zone.upper() in ("UTC", "Z", "ETC/UTC") else ZoneInfo(zone)
        except (ValueError, KeyError) as err:  # ZoneInfoNotFoundError is a KeyError
            raise ValueError(f"bundle.toml: unknown [engine] log_timezone {zone!r}") from err
        self.cache: dict[bytes, int] = {}  # second in the log zone -> epoch µs
        self.utc_cache: dict[bytes, int] = {}  # second in UTC -> epoch µs
        self.days: dict[bytes, int] = {}  # UTC date -> epoch s of its midnight

    def sec(self, s: bytes, utc: bool = False) -> int:
        """'YYYY-MM-DD HH:MM:SS' (or with a T) -> epoch µs; ValueError if it is not one."""
        cache = self.utc_cache if utc else self.cache
        v = cache.get(s)
        if v is None:
            if len(cache) > 65536:
                cache.clear()
            if utc or self.tz is UTC:  # midnight per day, then arithmetic
                day = self.days.get(s[:10])
                if day is None:
                    midnight = datetime.strptime(s[:10].decode(), "%Y-%m-%d").replace(tzinfo=UTC)
                    day = self.days[s[:10]] = int(midnight.timestamp())
                h, m, sec = int(s[11:13]), int(s[14:16]), int(s[17:19])
                if h > 23 or m > 59 or sec > 60 or s[13:14] != b":" or s[16:17] != b":":
                    raise ValueError(f"not a time: {s!r}")
                v = (day + h * 3600 + m * 60 + sec) * 1_000_000
            else:
                dt = datetime.strptime(s.decode().replace("T", " "), "%Y-%m-%d %H:%M:%S")
                v = int(dt.replace(tzinfo=self.tz).timestamp()) * 1_000_000
            cache[s] = v
        return v

    def text(self, sec: bytes, frac: bytes | None) -> int | None:
        try:
            return self.sec(sec) + (int(frac.ljust(6, b"0")) if frac else 0)
        except ValueError:  # digits in the shape of a time that is none (month 13)
            return None

    def iso(self, s: bytes) -> int | None:
        try:
            if len(s) >= 19 and s[10:11] in (b"T", b" "):
                tail = s[19:]
                utc = tail.endswith(b"Z")
                tail = tail[:-1] if utc else tail
                if not tail or (tail[:1] in (b".", b",") and tail[1:].isdigit()):
                    return self.sec(s[:19], utc) + (int(tail[1:7].ljust(6, b"0")) if tail else 0)
            dt = datetime.fromisoformat(s.decode().replace("Z", "+00:00"))  # an explicit offset, or another shape
        except (ValueError, UnicodeDecodeError):
            return None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=self.tz)
        return int(round(dt.timestamp() * 1_000_000))


def log_zone(bundle: Path) -> str:
    try:
        doc = tomllib.loads((bundle / "bundle.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return "UTC"
    engine = doc.get("engine")
    zone = engine.get("log_timezone", "UTC") if isinstance(engine, dict) else "UTC"
    return zone if isinstance(zone, str) and zone else "UTC"


def sources(bundle: Path, pages: bool) -> list[tuple[str, Path, str]]:
    """(relative path, file, kind) of every file to replay, sorted by relative path."""
    out = []
    engine = bundle / "engine"
    for node in sorted(p for p in engine.iterdir() if p.is_dir()):
        for name, kind in (("server.log", "text"), ("requests.jsonl", "requests")):
            if (node / name).is_file():
                out.append((f"engine/{node.name}/{name}", node / name, kind))
    if pages and (bundle / "pages").is_dir():
        for f in sorted((bundle / "pages").glob("*.jsonl")):
            out.append((f"pages/{f.name}", f, "pages"))
    return sorted(out)


def lines(
    fidx: int, path: Path, kind: str, clock: Clock
) -> Iterator[tuple[int, int, int, bytes, int | None, bytes | None]]:
    """(due µs or STARTUP, file index, bundle line, data, own log µs, raw stamp) in file order; due is
    monotone within the file."""
    due = STARTUP
    head = kind == "text"
    fast = JSON_TS.get(kind)
    with path.open("rb") as f:
        for n, data in enumerate(f, 1):
            own: int | None = None
            raw: bytes | None = None
            if kind == "text":
                m = TEXT_TS.match(data)
                if m:
                    own = clock.text(m[1], m[2])
                    raw = data[1 : m.end() - 1] if own is not None else None
            else:
                m = fast.match(data) if fast else None
                if m:
                    raw = m[1]
                else:
                    try:
                        v = json.loads(data).get(JSON_KEY[kind])
                    except (ValueError, AttributeError):
                        v = None
                    raw = v.encode() if isinstance(v, str) else None
                own = clock.iso(raw) if raw else None
            if head:
                if any(mk in data for mk in STARTUP_MARKERS):
                    yield STARTUP, fidx, n, data, own, raw
                    continue
                head = False
            if own is not None and own > due:
                due = own
            yield due, fidx, n, data, own, raw
