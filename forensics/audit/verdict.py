"""From Facts to a verdict per server, and the prefill/decode leak windows. Never guesses:

- `pool_smaller_than_context` needs a proof in the log: an engine error or warning saying so, an
  SGLang over-length abort whose limit M has M + 6 < context (then the pool is exactly M + 6:
  forensics.engines.sglang.pool_from_limit), a vLLM concurrency below 1.00x, or a rank whose binding
  pool is below the context length.
- `ok` needs every rank's binding pool (an exact size, not an upper bound) >= the context length,
  or a vLLM concurrency of at least 1.01x on every rank reporting one (1.00x is rounded: then the
  token count decides).
- otherwise `unknown`, with the missing number named.
A pool the log gives as blocks x block size is derived, and the reason says so, citing the line of
each factor; one whose block size is the engine's default (not in the log) is assumed, proves
neither a fit nor a shortfall, and is not reported as the server's pool size.
The context length comes from the log; `--context-length` only fills in when the log has none.
"""

from __future__ import annotations

from typing import Any

from forensics.audit.model import OK, TOO_SMALL, UNKNOWN, ServerAudit
from forensics.engines.facts import Evidence, Facts, Pool
from forensics.engines.sglang import max_req_input_len, pool_from_limit

MAX_RANK_EVIDENCE = 64


def _binding(pools: list[Pool]) -> Pool | None:
    usable = [p for p in pools if p.priority < 9]
    if not usable:
        return None
    best = min(p.priority for p in usable)
    return min((p for p in usable if p.priority == best), key=lambda p: p.tokens)


def decide(facts: Facts, path: str, node: str | None, context_length: int | None) -> ServerAudit:
    audit = ServerAudit(path=path, engine=facts.engine, node=node, role=facts.role, model=facts.model)
    audit.page_size, audit.notes = facts.page_size, list(facts.notes)
    evidence: list[Evidence] = [e for e in (facts.role_evidence, facts.page_evidence) if e is not None]

    ctx, audit.context_source = facts.context_len, "log" if facts.context_len is not None else None
    if ctx is not None and facts.context_evidence is not None:
        evidence.append(facts.context_evidence)
    if ctx is None and context_length is not None:
        ctx, audit.context_source = context_length, "--context-length"
        audit.notes.append(f"context length {context_length} supplied by --context-length (not in the log)")
    elif ctx is not None and context_length is not None and ctx != context_length:
        audit.notes.append(f"--context-length {context_length} ignored: the log states {ctx}")
    audit.context_len = ctx

    bindings: dict[str, Pool] = {}
    for rank in sorted(facts.pools):
        pools, binding = facts.pools[rank], _binding(facts.pools[rank])
        row: dict[str, Any] = {
            "rank": rank or "-",
            "pool_tokens": binding.tokens if binding else None,
            "binding": binding.kind if binding else None,
            "exact": binding.exact if binding else None,
            "derivation": binding.derivation.describe() if binding and binding.derivation else None,
            "pools": [{"kind": p.kind, "tokens": p.tokens, "line": p.evidence.line} for p in pools],
        }
        if rank in facts.concurrency:
            row["concurrency"] = facts.concurrency[rank][0]
        audit.ranks.append(row)
        if binding:
            bindings[rank] = binding
    for rank, (value, ev) in facts.concurrency.items():
        if rank not in facts.pools:
            audit.ranks.append({"rank": rank or "-", "pool_tokens": None, "concurrency": value, "pools": []})
        evidence.append(ev)
    if facts.concurrency:
        audit.max_concurrency = min(v for v, _ in facts.concurrency.values())

    small: list[str] = []
    stated: list[int] = [p.tokens for p in bindings.values() if not p.assumed]
    for reason, pool, ev in facts.proofs:
        small.append(reason)
        evidence.append(ev)
        if pool is not None:
            stated.append(pool)
    if ctx is not None:
        for m, ev in facts.max_input_seen:
            if (pool := pool_from_limit(m)) < ctx:
                small.append(f"scheduler limit {m} + {pool - m} < context {ctx}, so the pool holds {pool} tokens")
                stated.append(pool)
                evidence.append(ev)
                break
    audit.pool_tokens = min(stated) if stated else None

    verdict, reason = _verdict(facts, bindings, ctx, small)
    ordered = sorted(bindings.items(), key=lambda kv: kv[1].tokens)
    if verdict != UNKNOWN or facts.concurrency:
        evidence.extend(p.evidence for _, p in ordered[:MAX_RANK_EVIDENCE])
    if ordered and (d := ordered[0][1].derivation) is not None:
        # the smallest binding pool is the one the verdict and the pool size rest on
        audit.derivation = d
        reason = f"{reason}; {d.describe()}"
        evidence.extend(e for e in (d.blocks_evidence, d.size_evidence) if e is not None)
    audit.verdict, audit.reason = verdict, reason

    if facts.engine == "sglang":
        _sglang_limit(audit, facts, ctx, bindings)
    seen: set[tuple[str, int]] = set()
    for ev in sorted(evidence, key=lambda e: (e.file, e.line)):
        if (ev.file, ev.line) not in seen:
            seen.add((ev.file, ev.line))
            audit.evidence.append(ev)
    return audit


def _verdict(facts: Facts, bindings: dict[str, Pool], ctx: int | None, small: list[str]) -> tuple[str, str]:
    conc = facts.concurrency
    low = sorted(f"{r or '-'}: {v:.2f}x" for r, (v, _) in conc.items() if v < 1.0)
    if low:
        small.append(f"maximum concurrency below 1.00x ({', '.join(low)}): one full-length request cannot fit")
    below = {r: p for r, p in bindings.items() if ctx is not None and p.tokens < ctx and not p.assumed}
    if below and not (conc and not low):  # with a concurrency >= 1.00x the token count does not decide
        r, p = min(below.items(), key=lambda kv: kv[1].tokens)
        small.insert(0, f"KV pool {p.tokens} < context {ctx} on rank {r or '-'} ({p.kind})")
    if small:
        return TOO_SMALL, "; ".join(small)
    if conc and all(v >= 1.01 for v, _ in conc.values()):
        return OK, f"maximum concurrency {min(v for v, _ in conc.values()):.2f}x >= 1.00x for context {ctx}"
    if ctx is None:
        what = "a KV pool size but no context length" if bindings else "neither a KV pool size nor a context length"
        return UNKNOWN, f"the log has {what}; pass --context-length"
    if not bindings:
        return UNKNOWN, "no KV pool line in the log (cut before the pool was allocated?)"
    if below:  # only reached with a concurrency of exactly 1.00x (rounded) and fewer tokens than the context
        r, p = min(below.items(), key=lambda kv: kv[1].tokens)
        return (
            TOO_SMALL,
            f"KV pool {p.tokens} < context {ctx} on rank {r or '-'} ({p.kind}); concurrency 1.00x",
        )
    if any(p.assumed for p in bindings.values()):
        return UNKNOWN, "the KV pool rests on a block size the log does not state: it proves neither fit nor shortfall"
    if not all(p.exact for p in bindings.values()):
        return UNKNOWN, "only an upper bound of the KV pool is logged; it does not prove a fit"
    n = min(p.tokens for p in bindings.values())
    extra = " (maximum concurrency printed as 1.00x, rounded: token count decides)" if conc else ""
    return OK, f"KV pool {n} >= context {ctx} on every rank ({len(bindings)} logged){extra}"


def _sglang_limit(audit: ServerAudit, facts: Facts, ctx: int | None, bindings: dict[str, Pool]) -> None:
    seen = facts.max_input_seen[-1][0] if facts.max_input_seen else None
    if ctx is not None and audit.pool_tokens is not None and (bindings or audit.verdict == TOO_SMALL):
        audit.max_req_input_len = max_req_input_len(ctx, audit.pool_tokens)
        if seen is not None and seen != audit.max_req_input_len:
            audit.notes.append(f"the log shows limit {seen}, computed {audit.max_req_input_len}")
    elif seen is not None:
        audit.max_req_input_len = seen
        audit.notes.append(f"max_req_input_len {seen} read from an over-length abort line")


def attach_leak_windows(audits: list[ServerAudit]) -> None:
    """For each SGLang prefill/decode pair with the same context length: prompts of length L with
    prefill.max_req_input_len <= L < decode.max_req_input_len are replaced by a 1-token placeholder
    on prefill while decode allocates and attends L positions."""

    def ok(a: ServerAudit, role: str) -> bool:
        return a.engine == "sglang" and a.role == role and a.max_req_input_len is not None and bool(a.context_len)

    for p in (a for a in audits if ok(a, "prefill")):
        for d in (a for a in audits if ok(a, "decode")):
            if p.context_len != d.context_len:
                p.notes.append(f"no leak window with {d.path}: context {p.context_len} vs {d.context_len}")
                continue
            assert p.max_req_input_len is not None and d.max_req_input_len is not None
            window = {
                "prefill": p.path,
                "decode": d.path,
                "context_len": p.context_len,
                "start": p.max_req_input_len,
                "end": d.max_req_input_len,
                "empty": p.max_req_input_len >= d.max_req_input_len,
            }
            p.leak_windows.append(window)
            d.leak_windows.append(window)
