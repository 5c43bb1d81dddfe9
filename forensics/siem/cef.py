"""ArcSight Common Event Format, as the CEF Implementation Standard defines it (OpenText/Micro Focus,
SmartConnectors 25.1, "Implementing ArcSight CEF", chapter 1 "Character Encoding", chapter 2 "ArcSight
Extension Dictionary", appendix A "Date Formats"):

    CEF:Version|Device Vendor|Device Product|Device Version|Device Event Class ID|Name|Severity|Extension

Header: ``\\`` and ``|`` are escaped with a backslash; a header field holds one line (multi-line values are
allowed only in extension values), so CR and LF become spaces there. Extension: ``key=value`` pairs
separated by spaces; ``\\`` and ``=`` are escaped with a backslash, a newline is written ``\\n`` and a
carriage return ``\\r``. Pipes in the extension are not escaped. Keys are the dictionary's: rt (milliseconds
since the epoch), externalId, duser (the recipient account), suser (the accounts whose KV it attended),
dhost/shost (decode and prefill node), msg, reason, cs1..cs6 and cn1..cn3 with their labels, filePath.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from forensics.siem.model import PRODUCT, VENDOR, Event, version

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def header_escape(value: Any) -> str:
    text = str(value).replace("\\", "\\\\").replace("|", "\\|")
    return text.replace("\r\n", " ").replace("\r", " ").replace("\n", " ")


def ext_escape(value: Any) -> str:
    text = str(value).replace("\\", "\\\\").replace("=", "\\=")
    return text.replace("\n", "\\n").replace("\r", "\\r")  # each kept: a CR LF reads back as CR LF


# the dictionary's length of each string key written here (chapter 2): a consumer may cut or drop a
# longer value, so the export cuts it first and says so in the value; the CSVs hold every value whole
LENGTH = {"externalId": 40, "duser": 1023, "suser": 1023, "dhost": 1023, "shost": 1023, "msg": 1023,
          "reason": 1023, "filePath": 1023, **{f"cs{i}": 4000 for i in range(1, 7)},
          **{f"cs{i}Label": 1023 for i in range(1, 7)}, **{f"cn{i}Label": 1023 for i in range(1, 4)}}  # fmt: skip
CUT = "..."


def fit(key: str, value: Any) -> Any:
    """`value` within the dictionary's length for `key`. A list of accounts (suser) keeps whole names and
    says how many it left out (" (+N more)"); any other value is cut and ends with "..."."""
    limit = LENGTH.get(key)
    if limit is None or not isinstance(value, str) or len(value) <= limit:
        return value
    if key == "suser":
        names = value.split(";")
        for kept in range(len(names) - 1, 0, -1):
            text = f"{';'.join(names[:kept])} (+{len(names) - kept} more)"
            if len(text) <= limit:
                return text
    return value[: limit - len(CUT)] + CUT


def _ms(ev: Event) -> int:
    """Milliseconds since the epoch, in integers (a float product can fall 1 ms short)."""
    return (ev.time - EPOCH) // timedelta(milliseconds=1)


def _custom(pairs: list[tuple[str, str, Any]]) -> list[tuple[str, Any]]:
    """cs1..cs6 / cn1..cn3 each with its Label key, as the dictionary pairs them; empty values left out."""
    out: list[tuple[str, Any]] = []
    for key, label, value in pairs:
        if value is None or value == "":
            continue
        out += [(f"{key}Label", label), (key, value)]
    return out


def extension(ev: Event) -> list[tuple[str, Any]]:
    r = ev.row
    if ev.source == "finding":
        ext: list[tuple[str, Any]] = [
            ("rt", _ms(ev)),
            ("externalId", r["request_id"]),
            ("duser", r["account_id"]),
            ("suser", r.get("source_accounts", "")),
            ("dhost", r.get("decode_node", "")),
            ("shost", r.get("prefill_node", "")),
        ]
        ext += _custom([
            ("cs1", "cohort", r["cohort"]),
            ("cs2", "status", r["status"]),
            ("cs3", "evidence", r["evidence"]),
            ("cs4", "incident", ev.incident),
            ("cs5", "kinds", r.get("kinds", "")),
            ("cs6", "room", r.get("room", "")),
            ("cn1", "sourceRequests", r["source_requests"]),
            ("cn2", "exposedSlots", r.get("exposed_slots", "")),
            ("cn3", "completionTokens", r.get("completion_tokens", "")),
        ])  # fmt: skip
        ext += [("reason", r.get("reason", "")), ("msg", ev.message)]
    else:
        last = r["evidence"][-1] if r["evidence"] else {}
        ext = [("rt", _ms(ev)), ("externalId", r["room"] or r["node"]), ("dhost", r["node"])]
        ext += _custom([
            ("cs1", "alertKind", r["kind"]),
            ("cs2", "room", r["room"]),
            ("cs3", "requestIds", ";".join(str(x) for x in r.get("request_ids") or [])),
            ("cs4", "incident", ev.incident),
            ("cs5", "evidenceText", last.get("text", "")),
            ("cs6", "detectedAt", r.get("detected_at") or ""),
            ("cn1", "evidenceLine", last.get("line", "")),
        ])  # fmt: skip
        ext += [("filePath", last.get("file", "")), ("msg", ev.message)]
    return [(k, v) for k, v in ext if v is not None and v != ""]


def render(ev: Event) -> str:
    head = ["CEF:0", VENDOR, PRODUCT, version(), ev.signature_id, ev.name, str(ev.severity)]
    head = [head[0], *(header_escape(h) for h in head[1:])]
    ext = " ".join(f"{k}={ext_escape(fit(k, v))}" for k, v in extension(ev))
    return "|".join(head) + "|" + ext
