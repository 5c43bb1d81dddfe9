"""Turn a raw engine log into logical lines: ANSI codes removed, line prefixes split off (with the
DP/TP/PP/EP rank they carry), and lines that a terminal or a log shipper wrapped joined again.

Line numbers are 1-based physical line numbers (split on b"\\n") of the first physical line of a
logical line. Bytes that are not UTF-8 are replaced, NUL and other control characters dropped.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from itertools import accumulate, islice
from pathlib import Path

from forensics.engines.facts import LogLine
from forensics.errors import InputError
from forensics.intake import shippers

MAX_LINE_CHARS = 200_000  # a binary blob without newlines is cut, not held whole
SNIFF_LINES = 200  # physical lines read to decide whether the file uses record prefixes
WRAP_MIN_WIDTH = 80  # a physical line shorter than this was not wrapped by a terminal
MAX_JOIN = 400  # physical lines joined into one logical line at most

_ANSI = re.compile(
    r"(?:\x1b|\\x1b|\\u001b|\\033|\^\[)(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])"
)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

# "Transport" prefixes added by the container runtime / shipper: stripped, never a record start.
_TRANSPORT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?\s+")
# Record prefixes written by the engines' loggers. Each may be followed by another.
_RECORD = [
    # SGLang: [2026-03-25 09:32:19] / [2026-03-25 09:32:19.123 DP1 TP3] / [... PP0 TP1 EP1]
    re.compile(r"^\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?P<rank>(?: [A-Z][A-Z_]*\d+)*)\]\s?"),
    # vLLM process tag: (EngineCore_DP0 pid=123) / (VllmWorker TP1 pid=9) / (VllmWorker rank=0 pid=9)
    re.compile(r"^\((?P<proc>[A-Za-z][\w.-]*(?: [A-Za-z]+[=_]?\d+)*)(?: pid=\d+)\)\s?"),
    # vLLM level line: INFO 02-19 23:56:55 [file.py:524] / INFO 02-19 23:56:55 file.py:524]
    re.compile(r"^(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[^\s\]]+:\d+\]\s?"),
    # TensorRT-LLM C++ / Python: [TensorRT-LLM][INFO] , [TensorRT-LLM][RANK 1][INFO] ,
    # [12/20/2025-04:21:10] [TRT-LLM] [I]
    re.compile(r"^(?:\[\d+\])?\[TensorRT-LLM\](?:\[RANK (?P<trank>\d+)\])?\[[A-Z]+\]\s?"),
    re.compile(r"^(?:\[\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d\] )?\[TRT-LLM\](?: \[RANK (?P<prank>\d+)\])? \[[A-Z]\]\s?"),
    # LMDeploy TurboMind and Python logging: [TM][INFO] ,
    # 2024-06-01 10:00:00,123 - lmdeploy - INFO - x.py:12 -
    re.compile(r"^\[TM\]\[[A-Z]+\]\s?"),
    re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:,\d+)? - [\w.]+ - [A-Z]+ - (?:[\w.]+:\d+ - )?"),
    # uvicorn / plain python logging
    re.compile(r"^(?:INFO|WARNING|ERROR|DEBUG|CRITICAL):\s+"),
]
_ANY_RECORD = re.compile("|".join(f"(?:{pat.pattern})" for pat in _RECORD))
_RANK_TOKEN = re.compile(r"(?:^|[\s_])((?:DP|TP|PP|EP|CP|ATTN_CP|MOE_DP)\d+|rank[=_]?\d+)")
_EXEMPT = re.compile(r"^(?:Traceback|\s{2}|\w[\w.]*(?:Error|Exception|Warning|Interrupt|Exit)\b)")


def clean(text: str) -> str:
    """Remove ANSI escape sequences (raw or escaped by a shipper) and control characters."""
    if "\x1b" in text or "\\" in text or "^[" in text:
        text = _ANSI.sub("", text)
    return _CONTROL.sub("", text)


def split_prefix(text: str) -> tuple[str, str, bool]:
    """Return (message, rank, has_record_prefix) for one cleaned physical line."""
    rest = _TRANSPORT.sub("", text, count=1)
    ranks: list[str] = []
    found = False
    for _ in range(6):
        m = _ANY_RECORD.match(rest)
        if not m:
            break
        found = True
        gd = m.groupdict()
        if gd.get("rank"):
            ranks.extend(gd["rank"].split())
        if gd.get("proc"):
            ranks.extend(t.replace("=", "").replace("_", "") for t in _RANK_TOKEN.findall(gd["proc"]))
        for key in ("trank", "prank"):
            if gd.get(key):
                ranks.append(f"rank{gd[key]}")
        rest = rest[m.end() :]
    return rest, " ".join(dict.fromkeys(ranks)), found


_OPENERS = ("ServerArgs(", "server_args=", "EngineConfig(")  # a repr the next lines may continue


def _unbalanced(text: str) -> bool:
    return any(w in text for w in _OPENERS) and text.count("(") > text.count(")")


def _physical(data: Iterable[tuple[int, bytes]]) -> Iterator[tuple[int, str]]:
    for n, raw in data:
        text = raw[:MAX_LINE_CHARS].decode("utf-8", errors="replace").rstrip("\r\n")
        # A progress bar rewrites its line with \r; each segment is a line of its own.
        for seg in text.split("\r"):
            yield n, clean(seg)


def logical_lines(name: str, data: Iterable[bytes]) -> Iterator[LogLine]:
    """Logical lines of one log file (`data` yields raw physical lines as bytes)."""
    return _logical(name, enumerate(data, start=1))


def _prefixed(head: list[tuple[int, str]]) -> bool:
    """Whether the file whose first physical lines are `head` uses record prefixes."""
    nonblank = [t for _, t in head if t.strip()]
    # wrapped records lower the share of prefixed physical lines: a quarter is enough. A line SGLang's
    # record prefix starts has one (split_prefix strips no transport prefix before a `[`, and the prefix
    # is one of _ANY_RECORD's): the one match is all split_prefix would find out
    sglang = _RECORD[0].match
    found = sum(1 if sglang(t) else split_prefix(t)[2] for t in nonblank)
    return bool(nonblank) and 4 * found >= len(nonblank)


def _logical(name: str, data: Iterable[tuple[int, bytes]], prefixed: bool | None = None) -> Iterator[LogLine]:
    """logical_lines of (physical line number, raw line) pairs: the numbers need not be consecutive.
    `prefixed`: the sniff of the file's head (_prefixed) where the caller has made it already (the lines
    given may then lack some of the head's), else made here of the first lines given."""
    phys = _physical(data)
    head: list[tuple[int, str]] = []
    if prefixed is None:
        for item in phys:
            head.append(item)
            if len(head) >= SNIFF_LINES:
                break
    prefixed_file = _prefixed(head) if prefixed is None else prefixed

    def stream() -> Iterator[tuple[int, str]]:
        yield from head
        yield from phys

    cur: LogLine | None = None
    cur_width = 0  # length of the last physical line in `cur`
    cur_record = False  # `cur` began with a record prefix
    joined = 0
    for n, text in stream():
        msg, rank, has_prefix = split_prefix(text)
        if cur is not None and joined < MAX_JOIN and text.strip() and not has_prefix:
            full_width = cur_width >= WRAP_MIN_WIDTH
            wrapped = prefixed_file and cur_record and not _EXEMPT.match(msg)
            if full_width and (_unbalanced(cur.text) or wrapped):
                cur = LogLine(cur.file, cur.line, cur.text + msg.strip("\n"), cur.rank)
                cur_width = len(text)
                joined += 1
                continue
        if cur is not None:
            yield cur
        if not text.strip():
            cur = None
            continue
        cur, cur_width, cur_record, joined = LogLine(name, n, msg, rank), len(text), has_prefix, 0
    if cur is not None:
        yield cur


SIEVE_CHUNK = 4096  # physical lines searched at once
# a physical line nothing joins and clean leaves as it is: SGLang's record prefix (split_prefix finds
# it; bytes: \d is ASCII only, stricter than the text pattern) and none of these bytes anywhere in it
# (control characters but the newline, so no escape and no carriage return; a backslash or ^[, which may
# begin an escaped ANSI code)
_SGLANG_PREFIX = re.compile(_RECORD[0].pattern.encode())
_NOT_PLAIN = (*(bytes([c]) for c in range(0x20) if c != 0x0A), b"\x7f", b"\\", b"^[")
_NOT_PLAIN_BYTES = b"".join(w for w in _NOT_PLAIN if len(w) == 1) + b"^"  # a chunk without them: one pass


def _holding(buf: bytes, starts: list[int], words: tuple[bytes, ...]) -> set[int]:
    """The indices of the lines (starting at `starts` in `buf`) that hold one of the words."""
    hit: set[int] = set()
    for w in words:
        pos = buf.find(w)
        while pos >= 0:
            i = bisect_right(starts, pos) - 1
            hit.add(i)
            pos = buf.find(w, starts[i + 1])
    return hit


def _sieve_chunk(raws: list[bytes], words: tuple[bytes, ...]) -> tuple[bytearray, set[int]]:
    """(per line: it is plain, the indices of the lines holding a word) of lines each ending with a
    newline but perhaps the last: a word (ASCII) is in a line's text exactly when its bytes are."""
    buf = b"".join(raws)
    starts = [0, *accumulate(len(r) for r in raws)]
    match = _SGLANG_PREFIX.match
    plain = bytearray(match(r) is not None for r in raws)
    if len(buf.translate(None, _NOT_PLAIN_BYTES)) < len(buf):
        for i in _holding(buf, starts, _NOT_PLAIN):
            plain[i] = 0
    return plain, _holding(buf, starts, words)


def _sieved(data: Iterable[bytes], words: tuple[str, ...], dropped: list[int]) -> Iterator[tuple[int, bytes]]:
    """Numbered physical lines, less those past the sniffed head (SNIFF_LINES: what decides whether the
    file uses record prefixes) that are plain, hold none of `words` and are followed by a plain line or
    the end: such a line is a logical line of its own (nothing joins a line with a record prefix, and it
    joins nothing), so leaving it out leaves every other logical line as it is. The numbers of the lines
    left out are appended to `dropped`."""
    keys = tuple(w.encode() for w in words)
    numbered = enumerate(data, start=1)
    chunk = list(islice(numbered, SIEVE_CHUNK))
    plain, hit = _sieve_chunk([raw for _, raw in chunk], keys)
    while chunk:
        after = list(islice(numbered, SIEVE_CHUNK))
        after_plain, after_hit = _sieve_chunk([raw for _, raw in after], keys)
        last = len(chunk) - 1
        for i, (n, raw) in enumerate(chunk):
            next_plain = plain[i + 1] if i < last else (after_plain[0] if after else 1)
            if plain[i] and next_plain and n > SNIFF_LINES and i not in hit:
                dropped.append(n)
            else:
                yield n, raw
        chunk, plain, hit = after, after_plain, after_hit


def read_log(
    path: Path, keep: Callable[[str], bool] | None = None, head: int = 0, sieve: tuple[str, ...] | None = None
) -> list[LogLine]:
    """Logical lines of one file: the first `head`, then those `keep` accepts (all when None). With
    `sieve` (and `keep`), a logical line of one physical line holding none of the sieve's words may be
    left out (_sieved), in the head too: what a parse that reads only lines holding one of them makes of
    the lines does not change. A file that cannot be opened or read is an InputError naming it."""
    try:
        if fmt := shippers.recognise(path):  # a log shipper's export: the engine's lines inside it
            return _read(str(path), (s.raw + b"\n" for s in shippers.unwrap(path, fmt)), keep, head, sieve)
        with path.open("rb") as fh:
            return _read(str(path), fh, keep, head, sieve)
    except (ValueError, EOFError) as err:
        raise InputError(f"cannot read log file {path}: {err}") from err
    except OSError as err:
        raise InputError(f"cannot read log file {path}: {err.strerror or err}") from err


def _read(
    name: str,
    data: Iterable[bytes],
    keep: Callable[[str], bool] | None,
    head: int,
    sieve: tuple[str, ...] | None,
) -> list[LogLine]:
    if keep is None or sieve is None:
        return [ln for i, ln in enumerate(logical_lines(name, data)) if keep is None or i < head or keep(ln.text)]
    dropped: list[int] = []  # filled by the time a later line comes out of _logical
    return _kept(_logical(name, _sieved(data, sieve, dropped)), partial(bisect_left, dropped), keep, head)


def _kept(
    lines: Iterable[LogLine], before: Callable[[int], int], keep: Callable[[str], bool], head: int
) -> list[LogLine]:
    """The sieved logical lines among the first `head` or that `keep` accepts: each line left out
    (`before`: how many come before a physical line) is a logical line of its own, counted in a line's
    index all the same."""
    return [ln for i, ln in enumerate(lines) if i + before(ln.line) < head or keep(ln.text)]
