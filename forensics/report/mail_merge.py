"""Report stage, the notices' mail merge: notices/mail_merge.csv, one row per account notified (its notice
files, counts, dates, what to tell it, its request ids in cells a spreadsheet holds)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from forensics.outputs import cell, private_open

# a spreadsheet cuts a cell at 32,767 characters without a word: a longer id list is cut here, saying
# so and where the whole list is (requests.csv)
CELL_LIMIT = 32_000


def _ids(ids: list[str]) -> str:
    """A mail-merge cell of request ids: all of them, or as many as a spreadsheet cell holds and a note."""
    text = ";".join(ids)
    if len(text) <= CELL_LIMIT:
        return text
    cut = text[:CELL_LIMIT].rsplit(";", 1)[0]
    shown = cut.count(";") + 1
    return f"{cut};... ({len(ids) - shown:,} more: requests.csv)"


def merge_row(a: dict[str, Any], requests: dict[str, list[dict[str, Any]]], files: list[str]) -> dict[str, Any]:
    roles = a["roles"]

    def tell(key: str) -> str:
        return roles[key]["tell"] if key in roles else ""

    return {
        "account_id": a["account_id"],
        "notice_files": ";".join(files),
        "roles": ";".join(roles),
        "responses_received": a["responses_received"],
        "responses_received_confirmed": a["responses_received_confirmed"],
        "responses_received_same_account_only": a["responses_received_same_account_only"],
        "received_first_at": a["received_first_at"],
        "received_last_at": a["received_last_at"],
        "requests_exposed": a["requests_exposed"],
        "requests_exposed_confirmed": a["requests_exposed_confirmed"],
        "exposed_first_at": a["exposed_first_at"],
        "exposed_last_at": a["exposed_last_at"],
        "requests_possibly_exposed": a["requests_possibly_exposed"],
        "requests_likely_exposed": a["requests_likely_exposed"],
        "tell_received": tell("received"),
        "tell_exposed": tell("exposed"),
        "tell_possibly_exposed": tell("possibly_exposed"),
        "received_request_ids": _ids([r["request_id"] for r in requests["received"]]),
        "exposed_request_ids": _ids([r["request_id"] for r in requests["exposed"]]),
        "possibly_exposed_request_ids": _ids([r["request_id"] for r in requests["possibly_exposed"]]),
    }


def write_merge(path: Path, rows: list[dict[str, Any]]) -> None:
    """CSV cells as every findings CSV has them: neutralized against formula injection, times in UTC."""
    columns = MERGE_HEADER  # merge_row's keys, in this order (tests/report/test_notices.py)
    with private_open(path) as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(columns)
        for r in rows:
            w.writerow([cell(r[c]) for c in columns])


MERGE_HEADER = (
    "account_id", "notice_files", "roles", "responses_received", "responses_received_confirmed",
    "responses_received_same_account_only", "received_first_at", "received_last_at", "requests_exposed",
    "requests_exposed_confirmed", "exposed_first_at", "exposed_last_at", "requests_possibly_exposed",
    "requests_likely_exposed", "tell_received", "tell_exposed", "tell_possibly_exposed",
    "received_request_ids", "exposed_request_ids", "possibly_exposed_request_ids",
)  # fmt: skip
