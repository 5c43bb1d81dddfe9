"""A run folder into an evidence bundle (docs/evidence-bundle.md), `forensics investigate` on it, and the
figures the check prints. No GPU and no SGLang needed: tests/scripts/test_gpu_check.py runs this part
on canned server logs.

The run folder, as gpu_check.py leaves it:
  logs/prefill-0.log, logs/decode-0.log   each server's output, as it wrote it
  kvf/<node>/pages/*.jsonl                the plugin's page files (KVF_SGLANG_DIR=kvf/<node>)
  kvf/<node>/alerts.jsonl, metrics-<node>.prom   the guard's alerts and counters
  client.jsonl                            the client's record of every request it sent
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

from plan import DECODE, KINDS, PREFILL

NODES = (PREFILL, DECODE)
VIOLATION = re.compile(r"\((stale|foreign_write|in_flight|unproven|guard_error)\)")


class CheckError(Exception):
    """A step failed: the message says which and what to look at (printed without a traceback)."""


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a line cut by the stop
    return out


def gateway_record(c: dict[str, Any]) -> dict[str, Any]:
    """The spec's gateway record (section 2) of what the client sent and got: a client abort is 499
    (the status gateways log for a client that closed the connection), completion_tokens what it read."""
    return {
        "ts": c["sent_at"],
        "request_id": c["request_id"],
        "account_id": c["account_id"],
        "api_token_id": "tok-" + c["account_id"],
        "client_ip": "127.0.0.1",
        "user_agent": "kvf-gpu-check/1",
        "model": "dummy-llama",
        "status": int(c.get("status") or 0) or 502,  # no answer at all: what a gateway returns
        "prompt_tokens": int(c["prompt_tokens"]),
        "completion_tokens": int(c.get("completion_tokens") or 0),
        "duration_ms": float(c.get("duration_ms") or 0.0),
        "bootstrap_room": c.get("room"),  # None with --lb router: the join goes by rid
        "prefill_node": PREFILL,
        "decode_node": DECODE,
    }


def assemble(run: Path, bundle: Path) -> dict[str, Any]:
    """Build the bundle from the run folder; returns what it did (printed by the caller)."""
    if bundle.exists():
        shutil.rmtree(bundle)
    client = read_jsonl(run / "client.jsonl")
    if not client:
        raise CheckError(f"no client records in {run / 'client.jsonl'}: no request was sent")
    done: dict[str, Any] = {"requests": len(client), "page_files": 0, "page_events": 0, "peers_named": 0, "logs": []}
    for node in NODES:
        src = run / "logs" / f"{node}.log"
        if not src.exists():
            raise CheckError(f"{node}'s log {src} is missing")
        dst = bundle / "engine" / node / "server.log"
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
        done["logs"].append(str(dst.relative_to(bundle)))
    pages = bundle / "pages"
    pages.mkdir(parents=True)
    for node in NODES:
        for f in sorted((run / "kvf" / node / "pages").glob("*.jsonl")):
            rows = []
            for line in f.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    r = json.loads(line)
                except ValueError:
                    rows.append(line)  # kept as is: investigate rejects and counts it
                    continue
                # The plugin names the receiver decode-0 (KVF_SGLANG_PEERS="*=decode-0", plan.server_env);
                # a row that still names a host:port (a plugin run without that setting) goes to the
                # pair's one decode node too.
                if r.get("op") == "transfer" and r.get("peer") not in NODES:
                    r["peer"] = DECODE
                    done["peers_named"] += 1
                rows.append(json.dumps(r, separators=(", ", ": ")))
            (pages / f.name).write_text("".join(x + "\n" for x in rows))
            done["page_files"] += 1
            done["page_events"] += len(rows)
    gw = bundle / "gateway" / "gateway.jsonl"
    gw.parent.mkdir(parents=True)
    gw.write_text("".join(json.dumps(gateway_record(c)) + "\n" for c in client))
    (bundle / "bundle.toml").write_text(
        '[incident]\nid = "KVF-GPU-CHECK"\ntitle = "kv-forensics plugin check on one GPU"\n\n'
        '[engine]\nlog_timezone = "UTC"  # the servers ran with TZ=UTC\n'
    )
    return done


def investigate(python: str, bundle: Path, out: Path, timeout: float) -> str:
    cmd = investigate_cmd(python, bundle, out)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as err:
        raise CheckError(f"forensics investigate did not finish in {timeout:.0f} s") from err
    if p.returncode != 0:
        tail = "\n".join((p.stderr or p.stdout).strip().splitlines()[-15:])
        raise CheckError(f"forensics investigate failed (exit {p.returncode}):\n{tail}")
    return p.stdout + p.stderr


def investigate_cmd(python: str, bundle: Path, out: Path) -> list[str]:
    return [python, "-m", "forensics", "investigate", str(bundle), "--out", str(out)]


def _csv(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def guard_figures(run: Path) -> dict[str, Any]:
    """Per node: the alerts by violation kind, the rooms alarmed, and the metrics file's samples."""
    out: dict[str, Any] = {}
    for node in NODES:
        d = run / "kvf" / node
        alerts = read_jsonl(d / "alerts.jsonl")
        kinds = Counter(m.group(1) if (m := VIOLATION.search(a.get("summary", ""))) else "other" for a in alerts)
        prom = d / f"metrics-{node}.prom"
        metrics = [ln for ln in prom.read_text().splitlines() if ln and not ln.startswith("#")] if prom.exists() else []
        out[node] = {
            "alerts": len(alerts),
            "by_kind": dict(sorted(kinds.items())),
            "rooms": sorted({int(a["room"]) for a in alerts if a.get("room") is not None}),
            "rids": sorted({r for a in alerts for r in a.get("request_ids") or []}),
            "metrics": metrics,
            "metrics_file": prom.exists(),
        }
    return out


def figures(run: Path, out: Path) -> str:
    """The guard's and investigate's figures beside the client's own record, one row per kind of request."""
    client = read_jsonl(run / "client.jsonl")
    g = guard_figures(run)
    aff = {r["request_id"]: r for r in _csv(out / "affected_responses.csv")}
    alarmed_rooms = {r for n in NODES for r in g[n]["rooms"]}
    alarmed_rids = {r for n in NODES for r in g[n]["rids"]}
    lines = ["", "The guard (the plugin's own files):"]
    for node in NODES:
        f = g[node]
        kinds = ", ".join(f"{k} {v}" for k, v in f["by_kind"].items()) or "none"
        lines.append(f"  {node}: {f['alerts']} alerts ({kinds})")
        lines += [f"    {m}" for m in f["metrics"]] or [
            "    no metrics file (the guard writes it at its first alert)" if not f["metrics_file"] else ""
        ]
    exp = Counter(r.get("kind", "") for r in _csv(out / "exposures.csv"))
    st = Counter((r.get("status", ""), r.get("evidence", "")) for r in aff.values())
    lines += [
        "",
        "forensics investigate (" + str(out) + "):",
        f"  affected responses: {len(aff)} ("
        + (", ".join(f"{n} {s} by {e}" for (s, e), n in sorted(st.items())) or "none")
        + ")",
        "  exposures by kind: " + (", ".join(f"{k} {v}" for k, v in sorted(exp.items())) or "none"),
        f"  hazards: {len(_csv(out / 'hazards.csv'))}",
    ]
    for r in _csv(out / "coverage.csv"):
        lines.append(
            f"  coverage {r.get('node')}: page telemetry {r.get('page_telemetry')}, "
            f"seq gaps {r.get('seq_gaps')}, responses served {r.get('responses_served')}, "
            f"verified {r.get('responses_verified')}"
        )
    head = f"  {'kind':<13}{'sent':>6}{'200':>6}{'refused':>9}{'alarmed':>9}{'confirmed':>11}{'indeterm.':>11}"
    lines += [
        "",
        "Per kind of request (the client's record; refused: the guard's error reached the client;",
        "alarmed: a guard alert names its room or rid; confirmed/indeterm.: affected_responses.csv):",
        head,
    ]
    for kind in KINDS:
        rs = [c for c in client if c.get("kind") == kind]
        if not rs:
            continue
        ok = sum(1 for c in rs if c.get("status") == 200)
        refused = sum(1 for c in rs if c.get("guard_refused"))
        alarmed = sum(1 for c in rs if c.get("room") in alarmed_rooms or c["request_id"] in alarmed_rids)
        conf = sum(1 for c in rs if aff.get(c["request_id"], {}).get("status") == "confirmed")
        ind = sum(1 for c in rs if aff.get(c["request_id"], {}).get("status") == "indeterminate")
        lines.append(f"  {kind:<13}{len(rs):>6}{ok:>6}{refused:>9}{alarmed:>9}{conf:>11}{ind:>11}")
    failed = [c for c in client if not c.get("status")]
    if failed:
        lines.append(f"  {len(failed)} requests got no answer at all (first: {failed[0].get('error')})")
    return "\n".join(lines)
