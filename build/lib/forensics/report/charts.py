"""Report stage, charts: inline SVG built from plain rows (no scripts, no remote resources).

Every text that reaches the SVG is XML-escaped here, since the template marks the SVG safe.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from html import escape
from typing import Any

from forensics.outputs import fmt_ts

MAX_FILLED_BUCKETS = 400  # beyond this, empty buckets are not drawn (keeps the SVG bounded)
COLORS = {"confirmed": "#b3261e", "indeterminate": "#e0a100"}


def _empty(bucket: datetime) -> dict[str, Any]:
    return {"bucket": bucket, "confirmed": 0, "indeterminate": 0, "customer": 0}


def timeline_buckets(rows: list[dict[str, Any]], bucket: str) -> list[dict[str, Any]]:
    """Rows (bucket, status, responses) -> one dict per bucket with confirmed/indeterminate counts,
    empty buckets between the first and the last filled in when there are not too many."""
    by: dict[datetime, dict[str, Any]] = {}
    for r in rows:
        b = by.setdefault(r["bucket"], _empty(r["bucket"]))
        b[r["status"]] = b.get(r["status"], 0) + r["responses"]
        b["customer"] += r["customer"]
    if not by:
        return []
    step = timedelta(hours=1) if bucket == "hour" else timedelta(days=1)
    first, last = min(by), max(by)
    if (last - first) / step < MAX_FILLED_BUCKETS:
        t = first
        while t <= last:
            by.setdefault(t, _empty(t))
            t += step
    return [by[k] for k in sorted(by)]


def _label(t: datetime, bucket: str) -> str:
    s = fmt_ts(t)
    return s[:13] + ":00Z" if bucket == "hour" else s[:10]


def timeline_svg(buckets: list[dict[str, Any]], bucket: str) -> str:
    """Stacked bars of affected responses per bucket: confirmed below, indeterminate above."""
    width, height, left, bottom, top = 960, 260, 48, 56, 16
    if not buckets:
        return ""
    peak = max(b["confirmed"] + b["indeterminate"] for b in buckets) or 1
    plot_w, plot_h = width - left - 16, height - bottom - top
    bw = plot_w / len(buckets)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" '
        f'role="img" '
        f'aria-label="Affected responses per {bucket}">',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{width - 16}" y2="{top + plot_h}" stroke="#555"/>',
        f'<text x="{left - 6}" y="{top + 4}" text-anchor="end" font-size="11">{peak}</text>',
        f'<text x="{left - 6}" y="{top + plot_h}" text-anchor="end" font-size="11">0</text>',
    ]
    every = max(1, len(buckets) // 12)
    bar = min(bw * 0.8, 48.0)
    for i, b in enumerate(buckets):
        x = left + i * bw
        y = top + plot_h
        for status in ("confirmed", "indeterminate"):
            h = plot_h * b[status] / peak
            if h > 0:
                y -= h
                tip = escape(f"{_label(b['bucket'], bucket)}: {b[status]} {status}")
                parts.append(
                    f'<rect x="{x + (bw - bar) / 2:.1f}" y="{y:.1f}" width="{max(bar, 1):.1f}" '
                    f'height="{h:.1f}" fill="{COLORS[status]}"><title>{tip}</title></rect>'
                )
        if i % every == 0:
            parts.append(
                f'<text x="{x + bw / 2:.1f}" y="{top + plot_h + 16}" text-anchor="middle" '
                f'font-size="10">{escape(_label(b["bucket"], bucket))}</text>'
            )
    for j, status in enumerate(("confirmed", "indeterminate")):
        lx = left + j * 140
        parts.append(
            f'<rect x="{lx}" y="{height - 18}" width="12" height="12" fill="{COLORS[status]}"/>'
            f'<text x="{lx + 16}" y="{height - 8}" font-size="11">{status}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
