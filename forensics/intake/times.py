"""Intake, times: the RFC 3339 timestamps bundle.toml and the exclusion rules give, as aware UTC datetimes."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from forensics.errors import InputError


def parse_utc(value: Any, where: str) -> datetime:
    """An RFC 3339 timestamp with a zone, as an aware datetime; anything else is an InputError."""
    if isinstance(value, datetime):
        dt = value
    else:
        try:
            dt = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            raise InputError(f"{where}: {value!r} is not an RFC 3339 timestamp") from None
    if dt.tzinfo is None:
        raise InputError(f"{where}: {value!r} has no time zone (write e.g. 2026-09-09T14:05:00Z)")
    return dt.astimezone(ZoneInfo("UTC"))
