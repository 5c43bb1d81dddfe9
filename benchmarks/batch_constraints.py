"""The allocator model with and without SGLang's periodic batch lines, against the simulator's truth.

Each case is simulated once with `batch_lines` (a release's `Decode batch` / `Prefill batch` lines);
the same bundle is then analysed as written and with every batch line removed from its engine logs,
so the two runs differ only by the lines. Per run: the likely subset's (likelihood >= 0.5) precision and
recall against the true (recipient, source) pairs of the responses without page evidence, the sum of
the likelihoods over the true pair count, and what allocator_model's basis says of the lines.

    PYTHONPATH=. .venv/bin/python benchmarks/batch_constraints.py OUT [--seeds 9,17,72] [--release 0.5.11]
        [--lose prefill-aborted | decode-lines]

--lose takes log lines out of both runs first, as a lost or rotated log would: `prefill-aborted` the
prefill's Req Time Stats lines of the rooms aborted on the dark node (their pre-allocation time is then
known to a second only), `decode-lines` every 20th Req Time Stats line of the dark node (rooms the
lifecycle misses).
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import shutil
from pathlib import Path

from forensics.db import connect
from forensics.pipeline import analyze
from forensics.simulate import build_config, simulate

BATCH = re.compile(rb"\] (?:Decode|Prefill) batch[ .,\[]")


def measure(sim: Path, bundle: Path, dark: str) -> dict[str, object]:
    truth = list(csv.DictReader((sim / "truth" / "responses.csv").open()))
    sig = {r["request_id"] for r in truth if r["evidence"] == "signature"}
    pairs = {
        (r["recipient_request_id"], r["source_request_id"])
        for r in csv.DictReader((sim / "truth" / "exposures.csv").open())
        if r["recipient_request_id"] in sig
    }
    con = connect(":memory:")
    analyze(con, bundle)
    rows = con.execute("SELECT recipient_request_id, source_request_id, likelihood FROM possible_sources").fetchall()
    likely = {(r, s) for r, s, lik in rows if lik is not None and lik >= 0.5}
    basis = con.execute("SELECT basis FROM allocator_model WHERE node = ?", [dark]).fetchone()
    return {
        "true_pairs": len(pairs),
        "likely": len(likely),
        "precision": round(len(likely & pairs) / len(likely), 4) if likely else 1.0,
        "recall": round(len(likely & pairs) / len(pairs), 4) if pairs else 1.0,
        "sum_over_true": round(sum(lik for _, _, lik in rows if lik is not None) / max(len(pairs), 1), 4),
        "basis": (basis[0] if basis else "").split("; ", 1)[-1] if basis and "batch lines" in basis[0] else "",
    }


def lose(sim: Path, bundle: Path, what: str, dark: str) -> None:
    """Take the lines `what` names out of the bundle's engine logs (see the module's docstring)."""
    if what == "prefill-aborted":
        truth = csv.DictReader((sim / "truth" / "responses.csv").open())
        rooms = {r["room"].encode() for r in truth if r["aborted"] == "1" and r["decode_node"] == dark}
        for log in bundle.glob("engine/prefill-*/*.log"):
            keep = [
                x
                for x in log.read_bytes().splitlines(keepends=True)
                if not (b"type=prefill" in x and (m := re.search(rb"bootstrap_room=(\d+)", x)) and m[1] in rooms)
            ]
            log.write_bytes(b"".join(keep))
    elif what == "decode-lines":
        for log in bundle.glob(f"engine/{dark}/*.log"):
            out, n = [], 0
            for x in log.read_bytes().splitlines(keepends=True):
                if b"Req Time Stats(" in x:
                    n += 1
                    if n % 20 == 0:
                        continue
                out.append(x)
            log.write_bytes(b"".join(out))


def strip_lines(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst)
    for log in dst.glob("engine/*/*.log"):
        log.write_bytes(b"".join(x for x in log.read_bytes().splitlines(keepends=True) if not BATCH.search(x)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--seeds", default="9,17,72")
    ap.add_argument("--page-sizes", default="16,64")
    ap.add_argument("--release", default="0.5.11")
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--abort-rate", type=float, default=0.15)
    ap.add_argument("--interval", type=int, default=40, help="--decode-log-interval (SGLang's default 40)")
    ap.add_argument("--lose", choices=("none", "prefill-aborted", "decode-lines"), default="none")
    a = ap.parse_args()
    results = []
    for seed in [int(x) for x in a.seeds.split(",")]:
        for ps in [int(x) for x in a.page_sizes.split(",")]:
            case = dict(seed=seed, requests=a.requests, page_size=ps, no_telemetry="decode-1",
                        abort_rate=a.abort_rate, dark_aborts=True, batch_lines=a.release,
                        decode_log_interval=a.interval)  # fmt: skip
            sim = a.out / f"s{seed}-p{ps}"
            if sim.exists():
                shutil.rmtree(sim)
            simulate(sim, build_config("default", **case))
            lose(sim, sim / "bundle", a.lose, "decode-1")
            strip_lines(sim / "bundle", sim / "bundle-without")
            row: dict[str, object] = {"seed": seed, "page_size": ps, "lose": a.lose, "interval": a.interval}
            row["with"] = measure(sim, sim / "bundle", "decode-1")
            row["without"] = measure(sim, sim / "bundle-without", "decode-1")
            print(json.dumps(row), flush=True)
            results.append(row)
    (a.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
