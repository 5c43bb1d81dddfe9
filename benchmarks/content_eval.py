"""Content-match precision and recall against the simulator's truth (issue #33).

For each seed and echo rate: `forensics simulate` with texts in a text-carrying gateway format and a decode
node without page telemetry, then `forensics investigate`, then the content matches (content_matches.csv,
in the format's request ids, mapped back to the spec's by truth/gateway_ids.csv) scored against the true
exposure pairs (truth/exposures.csv) whose recipient has possible sources (possible_sources):
  precision = true pairs among the content matches / content matches;
  recall    = true pairs matched / true pairs among recipients with possible sources;
  recall_echoed = the same, over the true pairs whose response carries an echo (truth/echoes.csv).
--thresholds also scores every pair of content_matches (incident.duckdb) with shared >= T.

  .venv/bin/python benchmarks/content_eval.py --seeds 1 2 --rates 0.05 0.2 0.5
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from pathlib import Path

import duckdb


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def run_one(work: Path, seed: int, rate: float, fmt: str, noise: float, dark: str, requests: int) -> Path:
    name = f"{fmt}-s{seed}-e{rate:g}-n{noise:g}-r{requests}"
    sim, out = work / name, work / f"{name}.out"
    py = sys.executable
    if not (sim / "truth" / "echoes.csv").exists():
        subprocess.run([py, "-m", "forensics", "simulate", str(sim), "--seed", str(seed), "--gateway-format", fmt,
                        "--echo-rate", str(rate), "--echo-noise", str(noise), "--no-telemetry", dark,
                        "--requests", str(requests)], check=True, capture_output=True)  # fmt: skip
    if not (out / "content_matches.csv").exists():
        subprocess.run([py, "-m", "forensics", "investigate", str(sim / "bundle"), "--out", str(out), "--quiet",
                        "--force"], check=True, capture_output=True)  # fmt: skip
    return sim


def score(sim: Path, thresholds: list[int]) -> dict[str, object]:
    out = sim.parent / f"{sim.name}.out"
    ids_path = sim / "truth" / "gateway_ids.csv"
    to_spec = {r["format_request_id"]: r["spec_request_id"] for r in _rows(ids_path)} if ids_path.exists() else {}

    def spec(x: str) -> str:
        return to_spec.get(x, x)

    con = duckdb.connect(str(out / "incident.duckdb"), read_only=True)
    possible = {(spec(a), spec(b)) for a, b in con.execute(
        "SELECT recipient_request_id, source_request_id FROM possible_sources").fetchall()}  # fmt: skip
    scored = [(spec(a), spec(b), int(n)) for a, b, n in con.execute(
        "SELECT recipient_request_id, source_request_id, shared FROM internal.content_matches "
        "WHERE NOT checked").fetchall()]  # fmt: skip
    con.close()
    recipients = {a for a, _ in possible}
    truth = {(r["recipient_request_id"], r["source_request_id"]) for r in _rows(sim / "truth" / "exposures.csv")}
    truth = {p for p in truth if p[0] in recipients}
    echoed = {(r["recipient_request_id"], r["source_request_id"]) for r in _rows(sim / "truth" / "echoes.csv")
              if r["echoed"] == "1"} & truth  # fmt: skip
    matched = {
        (spec(r["recipient_request_id"]), spec(r["source_request_id"])) for r in _rows(out / "content_matches.csv")
    }

    def pr(pred: set[tuple[str, str]]) -> dict[str, float | int]:
        tp = len(pred & truth)
        return {
            "matches": len(pred),
            "true_matches": tp,
            "precision": round(tp / len(pred), 3) if pred else 1.0,
            "recall": round(tp / len(truth), 3) if truth else 1.0,
            "recall_echoed": round(len(pred & echoed) / len(echoed), 3) if echoed else 1.0,
        }

    return {
        "true_pairs": len(truth),
        "echoed_pairs": len(echoed),
        "possible_pairs": len(possible),
        "true_in_possible": len(truth & possible),
        "csv": pr(matched),
        "by_threshold": {t: pr({(a, b) for a, b, n in scored if n >= t}) for t in thresholds},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rates", type=float, nargs="+", default=[0.05, 0.2, 0.5])
    ap.add_argument("--format", default="litellm_payload", help="litellm_payload, litellm_spendlogs or otlp")
    ap.add_argument("--noise", type=float, default=0.1, help="--echo-noise of the simulations")
    ap.add_argument("--dark", default="decode-2", help="the decode node without page telemetry")
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--thresholds", type=int, nargs="*", default=[1, 2, 3, 4, 6])
    ap.add_argument("--work", type=Path, default=Path("/tmp/kvf-content-eval"))
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    a = ap.parse_args()
    results = []
    for seed in a.seeds:
        for rate in a.rates:
            sim = run_one(a.work, seed, rate, a.format, a.noise, a.dark, a.requests)
            results.append({"seed": seed, "echo_rate": rate, **score(sim, a.thresholds)})
    if a.json:
        print(json.dumps(results, indent=2))
        return
    print("| seed | echo rate | true pairs | echoed | matches | precision | recall | recall (echoed) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        c = r["csv"]
        print(f"| {r['seed']} | {r['echo_rate']:g} | {r['true_pairs']} | {r['echoed_pairs']} | {c['matches']} | "
              f"{c['precision']:.3f} | {c['recall']:.3f} | {c['recall_echoed']:.3f} |")  # fmt: skip
    print("\nby threshold (shared >= T): precision / recall (echoed)")
    for r in results:
        cells = ", ".join(f"T={t}: {v['precision']:.3f}/{v['recall_echoed']:.3f}" for t, v in r["by_threshold"].items())
        print(f"seed {r['seed']} echo {r['echo_rate']:g}: {cells}")


if __name__ == "__main__":
    main()
