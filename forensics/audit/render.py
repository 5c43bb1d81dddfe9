"""The audit as a table for people, and as JSON."""

from __future__ import annotations

import json

from forensics.audit.model import OK, UNKNOWN, ServerAudit

COLUMNS = ("PATH", "ENGINE", "ROLE", "POOL", "CONTEXT", "PAGE", "MAX INPUT", "VERDICT")


def _cell(value: object) -> str:
    return "-" if value is None else str(value)


def table(audits: list[ServerAudit]) -> str:
    rows = [COLUMNS]
    for a in audits:
        ctx = _cell(a.context_len) + ("*" if a.context_source == "--context-length" else "")
        rows.append(
            (
                a.path,
                a.engine,
                _cell(a.role),
                _cell(a.pool_tokens),
                ctx,
                _cell(a.page_size),
                _cell(a.max_req_input_len),
                a.verdict,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    out = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    if any(a.context_source == "--context-length" for a in audits):
        out.append("* context length from --context-length, not from the log")

    windows = {(w["prefill"], w["decode"]): w for a in audits for w in a.leak_windows}
    if windows:
        out += [
            "",
            "Leak windows (prompt lengths prefill replaces with a 1-token placeholder, decode accepts):",
        ]
        for w in windows.values():
            span = "empty" if w["empty"] else f"[{w['start']}, {w['end']}) = {w['end'] - w['start']} lengths"
            out.append(f"  {w['prefill']} -> {w['decode']}: {span} (context {w['context_len']})")

    # an `ok` from a derived pool is explained too: the reason names the two lines it multiplies
    explained = [a for a in audits if a.verdict != OK or a.derivation is not None]
    if explained:
        out += ["", "Reasons:"]
        for a in explained:
            out.append(f"  {a.path}: {a.verdict}: {a.reason}")
            if a.verdict != UNKNOWN:
                for ev in a.evidence[:3]:
                    out.append(f"    {ev.file}:{ev.line}: {ev.text[:160]}")
    return "\n".join(out)


def as_json(audits: list[ServerAudit]) -> str:
    return json.dumps([a.to_json() for a in audits], indent=2)
