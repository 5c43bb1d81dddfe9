"""Report stage, rendering: jinja2 templates in report/templates/ -> report.html and report.md (the
disclosure summary and the notification annex), technical_annex.html and technical_annex.md.

HTML is autoescaped; Markdown output escapes every interpolated value (finalize) unless a filter
marks it Raw, so a hostile user agent or account id stays text in both. Formatting lives in filters.
"""

from __future__ import annotations

import functools
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from forensics.outputs import fmt_ts, private_open
from forensics.paths import TEMPLATES
from forensics.report.charts import status_svg, summary_charts

MD_SPECIAL = re.compile(r"[\\`*\[\]|]|^[#>]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
MD_ANY = re.compile(r"[\\`*\[\]|#>_<\r\n]")  # none of these: the text needs no escaping (most cells)


class Raw(str):
    """Markdown text already made safe by a filter: finalize leaves it alone."""


def md_escape(value: Any) -> str:
    if isinstance(value, Raw):
        return value
    text = "" if value is None else str(value)
    if not MD_ANY.search(text):
        return text
    text = text.replace("<", "&lt;")  # no raw HTML: markdown renderers pass tags through
    text = MD_SPECIAL.sub(lambda m: "\\" + m.group(0), text)
    return text.replace("\r", " ").replace("\n", " ")


def md_code(lines: list[str] | str) -> Raw:
    """Lines for a fenced code block: fences and control characters inside cannot end the block."""
    text = "\n".join(lines) if isinstance(lines, list) else lines
    text = text.replace("```", "'''").replace("~~~", "'''")
    return Raw("".join(ch if ch in "\n\t" or ch >= " " else "?" for ch in text))


def md_block(text: str) -> Raw:
    """Output of a Markdown macro: its cells were escaped by finalize when the macro rendered them."""
    return Raw(text)


def f_ts(value: datetime | None, missing: str = "—") -> str:
    return fmt_ts(value) if value is not None else missing


def f_ts_html(value: datetime | None, missing: str = "—") -> Markup:
    """A time in HTML: never broken across lines (a printed "2026-08- / 27T03:09" cannot be read back)."""
    return Markup('<span class="nw">{}</span>').format(f_ts(value, missing))


def f_num(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.1f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def f_offset(us: int | None) -> str:
    return "—" if us is None else f"{us / 1e6:+.3f} s"


def f_plain(value: Any) -> str:
    """A free-form bundle.toml value (remediation) as one line of text."""
    if isinstance(value, list):
        return "; ".join(f_plain(v) for v in value)
    if isinstance(value, dict):
        return "; ".join(f"{k}: {f_plain(v)}" for k, v in sorted(value.items()))
    if isinstance(value, datetime):
        return fmt_ts(value)
    return str(value)


# one environment of each kind per process: its templates are compiled once and reused by every run
# the process renders (the loader still reloads a template whose file changed)
@functools.cache
def _env(markdown: bool) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html", "html.j2"), default_for_string=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=md_escape if markdown else None,
    )
    env.filters.update(ts=f_ts, num=f_num, offset=f_offset, plain=f_plain, code=md_code, block=md_block)
    if not markdown:
        env.filters["ts"] = f_ts_html
    return env


# the report's three parts: the summary and the notification annex in one file (the annex begins a
# new printed page), the technical annex in its own; and the GDPR Art. 33 form (forensics.report.edpb)
PARTS = {"report": "report", "technical_annex": "technical_annex", "edpb_art33": "edpb_art33"}


def render(ctx: dict[str, Any], out: Path) -> None:
    svg = {k: Markup(v) for k, v in summary_charts(ctx).items()}  # the charts escape their own text
    status = status_svg(ctx["timeline"]["rows"], ctx["timeline"]["bucket"])
    html_ctx = dict(ctx, charts_svg=svg, timeline_svg=Markup(status))
    for name, template in PARTS.items():
        html = _env(markdown=False).get_template(f"{template}.html.j2").render(**html_ctx)
        md = _env(markdown=True).get_template(f"{template}.md.j2").render(**ctx)
        md = re.sub(r"\n{3,}", "\n\n", re.sub(r"[ \t]+\n", "\n", md))
        for path, text in ((out / f"{name}.html", html), (out / f"{name}.md", md)):
            with private_open(path) as fh:
                fh.write(text)
    # the board brief: one printed page, HTML only (tests/report/test_notices.py prints it)
    with private_open(out / "brief.html") as fh:
        fh.write(_env(markdown=False).get_template("brief.html.j2").render(**html_ctx))
