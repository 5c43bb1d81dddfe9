"""Report stage, charts: inline SVG built from plain rows (no scripts, no remote resources).

Every chart has a title on each axis, a labelled scale (its peak and a middle tick, never a bare 0 and
a number) and a legend; every text that reaches the SVG is XML-escaped here, since the template marks
the SVG safe.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from html import escape
from typing import Any

from forensics.outputs import fmt_ts

MAX_FILLED_BUCKETS = 400  # beyond this, empty buckets are not drawn (keeps the SVG bounded)
STATUS_COLORS = {"confirmed": "#b3261e", "indeterminate": "#e0a100"}
# the customer cohort in the report's red; the excluded cohorts in quiet colours, in a fixed order
COHORT_COLORS = ["#b3261e", "#5b7db1", "#8a8f98", "#4f9a6b", "#b37d3d", "#7d5ba6"]


def cohort_order(cohorts: set[str]) -> list[str]:
    """customer first (the disclosure's subject), the others by name."""
    return sorted(cohorts, key=lambda c: (c != "customer", c))


def series_buckets(rows: list[dict[str, Any]], key: str, bucket: str) -> list[dict[str, Any]]:
    """Rows (bucket, <key>, responses) -> one dict per bucket {bucket, values: {series: n}}, with the
    empty buckets between the first and the last filled in when there are not too many."""
    by: dict[datetime, dict[str, int]] = {}
    for r in rows:
        by.setdefault(r["bucket"], {})[r[key]] = by.get(r["bucket"], {}).get(r[key], 0) + r["responses"]
    if not by:
        return []
    step = timedelta(hours=1) if bucket == "hour" else timedelta(days=1)
    first, last = min(by), max(by)
    if (last - first) / step < MAX_FILLED_BUCKETS:
        t = first
        while t <= last:
            by.setdefault(t, {})
            t += step
    return [{"bucket": k, "values": by[k]} for k in sorted(by)]


def status_buckets(rows: list[dict[str, Any]], bucket: str) -> list[dict[str, Any]]:
    """Rows (bucket, status, responses) -> series_buckets by status (the technical annex's chart and
    table: each bucket also carries its confirmed, indeterminate and customer counts as keys)."""
    out = series_buckets(rows, "status", bucket)
    customer: dict[datetime, int] = {}
    for r in rows:
        customer[r["bucket"]] = customer.get(r["bucket"], 0) + r["customer"]
    for b in out:
        v = b["values"]
        b.update(
            confirmed=v.get("confirmed", 0),
            indeterminate=v.get("indeterminate", 0),
            customer=customer.get(b["bucket"], 0),
        )
    return out


def _label(t: datetime, bucket: str) -> str:
    s = fmt_ts(t)
    return s[:13] + ":00Z" if bucket == "hour" else s[:10]


def _nice(peak: int) -> int:
    """The scale's top: the peak rounded up to 1, 2 or 5 times a power of ten."""
    if peak <= 1:
        return 1
    mag = 10 ** (len(str(peak)) - 1)
    return next(m * mag for m in (1, 2, 5, 10) if m * mag >= peak)


def _legend(series: list[str], colors: dict[str, str], left: float, y: float) -> list[str]:
    """A swatch and name per series, along the bottom; none for a single series (its title names it)."""
    return [
        f'<rect x="{left + j * 170}" y="{y}" width="12" height="12" fill="{colors[s]}"/>'
        f'<text x="{left + j * 170 + 16}" y="{y + 10}" font-size="11">{escape(s)}</text>'
        for j, s in enumerate(series if len(series) > 1 else [])
    ]


def stacked_svg(
    buckets: list[dict[str, Any]], series: list[str], colors: dict[str, str], bucket: str, y_title: str, aria: str
) -> str:
    """Stacked bars per time bucket (one segment per series, in `series` order from the bottom)."""
    width, height, left, bottom, top = 960, 280, 64, 76, 16
    if not buckets:
        return ""
    top_v = _nice(max(sum(b["values"].get(s, 0) for s in series) for b in buckets))
    plot_w, plot_h = width - left - 16, height - bottom - top
    bw = plot_w / len(buckets)
    base = top + plot_h
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" role="img" '
        f'aria-label="{escape(aria)}">',
        f'<line x1="{left}" y1="{base}" x2="{width - 16}" y2="{base}" stroke="#555"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{base}" stroke="#555"/>',
    ]
    for v in (top_v, top_v // 2) if top_v > 1 else (top_v,):
        y = base - plot_h * v / top_v
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - 16}" y2="{y:.1f}" stroke="#e3e5e8"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{v:,}</text>')
    parts.append(
        f'<text x="14" y="{top + plot_h / 2:.1f}" transform="rotate(-90 14 {top + plot_h / 2:.1f})" '
        f'text-anchor="middle" font-size="11">{escape(y_title)}</text>'
    )
    every = max(1, len(buckets) // 12)
    # hourly over days: a label at midnights only (the date), at most about 14 of them
    days = bucket == "hour" and len(buckets) > 48
    day_every = max(1, len({b["bucket"].date() for b in buckets}) // 14)
    bar = min(bw * 0.8, 48.0)
    for i, b in enumerate(buckets):
        x = left + i * bw
        y = float(base)
        for s in series:
            n = b["values"].get(s, 0)
            h = plot_h * n / top_v
            if h > 0:
                y -= h
                tip = escape(f"{_label(b['bucket'], bucket)}: {n:,} {s}")
                parts.append(
                    f'<rect x="{x + (bw - bar) / 2:.1f}" y="{y:.1f}" width="{max(bar, 1):.1f}" '
                    f'height="{h:.1f}" fill="{colors[s]}"><title>{tip}</title></rect>'
                )
        t = b["bucket"]
        if days and t.hour == 0 and t.toordinal() % day_every == 0:
            parts.append(
                f'<line x1="{x:.1f}" y1="{base}" x2="{x:.1f}" y2="{base + 4}" stroke="#555"/>'
                f'<text x="{x:.1f}" y="{base + 16}" text-anchor="middle" font-size="10">'
                f"{escape(_label(t, 'day'))}</text>"
            )
        elif not days and i % every == 0:
            parts.append(
                f'<text x="{x + bw / 2:.1f}" y="{base + 16}" text-anchor="middle" '
                f'font-size="10">{escape(_label(t, bucket))}</text>'
            )
    parts.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{base + 34}" text-anchor="middle" font-size="11">'
        f"{'hour (UTC; dates mark midnight)' if days else ('hour' if bucket == 'hour' else 'day') + ' (UTC)'}</text>"
    )
    parts += _legend(series, colors, left, height - 20)
    parts.append("</svg>")
    return "".join(parts)


def bars_svg(items: list[tuple[str, dict[str, int]]], series: list[str], colors: dict[str, str], x_title: str) -> str:
    """Horizontal stacked bars, one per labelled item (a node, a side of the exposure)."""
    if not items:
        return ""
    row, left, top = 26, 220, 8
    width = 960
    plot_w = width - left - 80
    height = top + row * len(items) + 62
    top_v = _nice(max(sum(v.get(s, 0) for s in series) for _, v in items))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" role="img" '
        f'aria-label="{escape(x_title)}">'
    ]
    for i, (label, values) in enumerate(items):
        y = top + i * row
        parts.append(f'<text x="{left - 8}" y="{y + 16}" text-anchor="end" font-size="12">{escape(label)}</text>')
        x = float(left)
        for s in series:
            n = values.get(s, 0)
            w = plot_w * n / top_v
            if w > 0:
                parts.append(
                    f'<rect x="{x:.1f}" y="{y + 4}" width="{w:.1f}" height="{row - 8}" fill="{colors[s]}">'
                    f"<title>{escape(f'{label}: {n:,} {s}')}</title></rect>"
                )
                x += w
        total = sum(values.get(s, 0) for s in series)
        parts.append(f'<text x="{x + 6:.1f}" y="{y + 16}" font-size="11">{total:,}</text>')
    base = top + row * len(items)
    parts.append(f'<line x1="{left}" y1="{base}" x2="{left + plot_w}" y2="{base}" stroke="#555"/>')
    for v in (0, top_v // 2, top_v) if top_v > 1 else (0, top_v):
        x = left + plot_w * v / top_v
        parts.append(f'<text x="{x:.1f}" y="{base + 14}" text-anchor="middle" font-size="10">{v:,}</text>')
    parts.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{base + 30}" text-anchor="middle" font-size="11">'
        f"{escape(x_title)}</text>"
    )
    parts += _legend(series, colors, left, height - 16)
    parts.append("</svg>")
    return "".join(parts)


def summary_charts(ctx: dict[str, Any]) -> dict[str, str]:
    """The summary's charts (SVG text): affected responses per day by cohort, customer responses per
    hour, per decode node by cohort, and the accounts on each side."""
    ch = ctx["charts"]
    cohorts = cohort_order({r["cohort"] for r in ch["daily"]} | {r["cohort"] for r in ch["nodes"]} | {"customer"})
    colors = {c: COHORT_COLORS[i % len(COHORT_COLORS)] for i, c in enumerate(cohorts)}
    per_node: dict[str, dict[str, int]] = {}
    for r in ch["nodes"]:
        per_node.setdefault(r["node"], {})[r["cohort"]] = r["responses"]
    t = ctx["totals"]
    sides = [
        ("recipient accounts (customer)", {"accounts": t["accounts_after"]}),
        ("source accounts, confirmed", {"accounts": t["customer_source_accounts"]}),
    ]
    if t.get("unknown_source_responses"):
        sides.append(("source accounts, possible", {"accounts": t["possible_customer_source_accounts"]}))
    return {
        "daily": stacked_svg(
            series_buckets(ch["daily"], "cohort", "day"),
            cohorts,
            colors,
            "day",
            "affected responses",
            "Affected responses per day by recipient cohort",
        ),
        "hourly": stacked_svg(
            series_buckets([r for r in ch["hourly"] if r["cohort"] == "customer"], "cohort", "hour"),
            ["customer"],
            colors,
            "hour",
            "customer responses",
            "Affected customer responses per hour",
        ),
        "nodes": bars_svg(sorted(per_node.items()), cohorts, colors, "affected responses per decode node"),
        "sides": bars_svg(sides, ["accounts"], {"accounts": COHORT_COLORS[0]}, "customer accounts"),
    }


def status_svg(buckets: list[dict[str, Any]], bucket: str) -> str:
    """The technical annex's timeline: affected responses per bucket by status, all cohorts."""
    return stacked_svg(
        buckets,
        ["confirmed", "indeterminate"],
        STATUS_COLORS,
        bucket,
        "affected responses",
        f"Affected responses per {bucket} by status",
    )
