"""Score investigate on simulated vLLM PD incidents against the simulator's truth (issue #50).

Each incident is `forensics simulate --engine vllm --vllm-pd` (vLLM's block pools, NixlConnector's pull,
the leaks of vLLM #52234: a stale reference after block reuse, reused references, a failed receive
served), per seed and block size; `forensics investigate` runs on it with every node's page events, and
again on a copy without pages/ (logs only). Per run, against truth/responses.csv and exposures.csv:
- affected responses: truly exposed responses, those reported (confirmed or indeterminate), recall,
  those confirmed and their precision (truly exposed among confirmed);
- pairs: true (recipient, source) pairs, their recall among exposures, and the precision of the
  confirmed pairs;
- possible-source recall: the true pairs of each indeterminate recipient found in exposures or
  possible_sources.

  .venv/bin/python benchmarks/vllm_pd_eval.py --seeds 901 902 903 --block-sizes 16 32 --out /tmp/vllmpd-bench

With prefix caching on decode too and cache salts (forensics.simulate.vllm_prefix), each simulation takes
the options after --simulate: `... --simulate --decode-prefix-caching --cache-salt-rate 0.3`.

Every figure here rests on this project's simulator: fitted, not field-measured.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb

AS_OF = "2026-09-10T12:00:00Z"


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def score(truth: Path, out: Path) -> dict[str, object]:
    resp = {r["request_id"]: r for r in _rows(truth / "responses.csv")}
    pairs = {(r["recipient_request_id"], r["source_request_id"]) for r in _rows(truth / "exposures.csv")}
    exposed = {k for k, r in resp.items() if r["exposed"] == "1"}
    con = duckdb.connect(str(out / "incident.duckdb"), read_only=True)
    try:
        aff = dict(con.execute("SELECT request_id, status FROM affected_responses").fetchall())
        ex = con.execute("SELECT recipient_request_id, source_request_id, status FROM exposures").fetchall()
        possible = set(con.execute("SELECT recipient_request_id, source_request_id FROM possible_sources").fetchall())
    finally:
        con.close()
    confirmed = {k for k, s in aff.items() if s == "confirmed"}
    indeterminate = {k for k, s in aff.items() if s == "indeterminate"}
    found = {(a, b) for a, b, _ in ex}
    conf_pairs = {(a, b) for a, b, s in ex if s == "confirmed"}
    dark = {p for p in pairs if p[0] in indeterminate}

    def ratio(n: int, d: int) -> float | None:
        return round(n / d, 3) if d else None

    return {
        "exposed": len(exposed),
        "reported": len(exposed & set(aff)),
        "missed": len(exposed - set(aff)),
        "affected_recall": ratio(len(exposed & set(aff)), len(exposed)),
        "confirmed": len(confirmed),
        "false_confirmed": len(confirmed - exposed),
        "confirmed_precision": ratio(len(confirmed & exposed), len(confirmed)),
        "indeterminate": len(indeterminate),
        "true_pairs": len(pairs),
        "pair_recall": ratio(len(pairs & found), len(pairs)),
        "confirmed_pairs": len(conf_pairs),
        "pair_precision": ratio(len(conf_pairs & pairs), len(conf_pairs)),
        "indeterminate_true_pairs": len(dark),
        "possible_source_recall": ratio(len(dark & (possible | found)), len(dark)),
        "possible_pairs": len(possible),
    }


def run(bin_dir: Path, args: list[str]) -> None:
    subprocess.run([str(bin_dir / "python"), "-m", "forensics", *args], check=True, capture_output=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[901, 902, 903])
    ap.add_argument("--block-sizes", type=int, nargs="+", default=[16, 32])
    ap.add_argument("--requests", type=int, default=600)
    ap.add_argument("--out", type=Path, default=Path("/tmp/vllmpd-bench"))
    ap.add_argument("--simulate", nargs=argparse.REMAINDER, default=[], help="more options of every simulate")
    a = ap.parse_args()
    bin_dir = Path(sys.executable).parent
    results = []
    for seed in a.seeds:
        for bs in a.block_sizes:
            sim = a.out / f"s{seed}-b{bs}"
            if sim.exists():
                shutil.rmtree(sim)
            run(bin_dir, ["simulate", str(sim), "--seed", str(seed), "--requests", str(a.requests),
                          "--engine", "vllm", "--vllm-pd", "--page-size", str(bs), *a.simulate])  # fmt: skip
            logs = a.out / f"s{seed}-b{bs}-logs"
            if logs.exists():
                shutil.rmtree(logs)
            shutil.copytree(sim / "bundle", logs / "bundle", ignore=shutil.ignore_patterns("pages"))
            for name, bundle in (("pages", sim / "bundle"), ("logs only", logs / "bundle")):
                out = bundle.parent / "out"
                run(bin_dir, ["investigate", str(bundle), "--out", str(out), "--as-of", AS_OF])
                row = {"seed": seed, "block_size": bs, "evidence": name} | score(sim / "truth", out)
                results.append(row)
                print(json.dumps(row), flush=True)
    (a.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    cols = ["seed", "block_size", "evidence", "exposed", "reported", "missed", "affected_recall", "confirmed",
            "false_confirmed", "confirmed_precision", "indeterminate", "true_pairs", "pair_recall",
            "confirmed_pairs", "pair_precision", "indeterminate_true_pairs", "possible_source_recall",
            "possible_pairs"]  # fmt: skip
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in results:
        print("| " + " | ".join("n/a" if r[c] is None else str(r[c]) for c in cols) + " |")


if __name__ == "__main__":
    main()
