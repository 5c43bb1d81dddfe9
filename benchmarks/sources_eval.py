"""Score the source side of a disclosure against the simulator's truth, per simulated incident.

For each incident (seed, page size, allocator, which decode nodes keep page telemetry) it runs
`forensics simulate`, optionally removes `pages/` (a fully uninstrumented cluster), runs
`forensics investigate --json`, and scores the responses without page evidence:
- possible-pair recall: true (recipient, source) pairs among possible_sources (the superset: 1.000);
- the likely tier, only where the headline prints one: its precision and recall against the truth;
- calibration: the sum of the likelihoods over the true pair count (1.0 is calibrated);
- what the tool itself measured of its top tier (manifest's source_tiers) beside what the truth says;
- the stored possible-source rows (pool, windows and late-write pairs, not the pairs);
- with --echo-rates, the content matches (gateway texts whose responses echo their sources at that rate):
  precision and recall against the true pairs, and recall of the pairs whose response echoes.

  .venv/bin/python benchmarks/sources_eval.py --seeds 601 602 603 --page-sizes 1 16 64 --out /tmp/sources
  .venv/bin/python benchmarks/sources_eval.py --seeds 601 --uninstrumented

Every figure here rests on this project's simulator: it is fitted, not field-measured.
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

BIN = Path(sys.executable).parent


def _rows(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def score(sim: Path, out: Path, summary: dict, all_dark: bool) -> dict[str, object]:
    """all_dark: pages/ was removed, so every true pair is one the logs alone must bound."""
    to_spec = {r["format_request_id"]: r["spec_request_id"] for r in _rows(sim / "truth" / "gateway_ids.csv")}

    def spec(x: str) -> str:  # a gateway format's request id as the truth names it
        return to_spec.get(x, x)

    truth = {r["request_id"]: r for r in _rows(sim / "truth" / "responses.csv")}
    dark = {
        (r["recipient_request_id"], r["source_request_id"])
        for r in _rows(sim / "truth" / "exposures.csv")
        if all_dark or truth.get(r["recipient_request_id"], {}).get("evidence") == "signature"
    }
    possible: dict[tuple[str, str], float | None] = {}
    for r in _rows(out / "possible_sources.csv"):
        lik = r.get("likelihood", "")
        possible[(spec(r["recipient_request_id"]), spec(r["source_request_id"]))] = float(lik) if lik else None
    tiers = summary.get("source_tiers") or {}
    printed = (
        bool(tiers.get("likely_printed", False))
        if tiers
        else any(v is not None and v >= 0.5 for v in possible.values())
    )
    likely = {k for k, v in possible.items() if v is not None and v >= 0.5} if printed else set()
    # what the subset the tool withheld would have scored (the check that withholding it was right)
    withheld = {k for k, v in possible.items() if v is not None and v >= 0.5} if not printed else set()
    lsum = sum(v for v in possible.values() if v is not None)
    content = {
        (spec(r["recipient_request_id"]), spec(r["source_request_id"])) for r in _rows(out / "content_matches.csv")
    }
    echoed = {(r["recipient_request_id"], r["source_request_id"]) for r in _rows(sim / "truth" / "echoes.csv")
              if r["echoed"] == "1"} & dark  # fmt: skip
    con = duckdb.connect(str(out / "incident.duckdb"), read_only=True)
    stored = sum(
        con.execute(f"SELECT count(*) FROM internal.{t}").fetchone()[0]  # type: ignore[index]
        for t in ("possible_pool", "possible_windows", "possible_extra")
    )
    con.close()
    texts = (sim / "truth" / "echoes.csv").exists()
    return {
        "true_pairs": len(dark),
        "possible_rows": len(possible),
        "possible_recall": round(len(dark & set(possible)) / len(dark), 3) if dark else None,
        "likely_printed": printed,
        "likely_pairs": len(likely),
        "likely_precision": round(len(likely & dark) / len(likely), 3) if likely else None,
        "likely_recall": round(len(likely & dark) / len(dark), 3) if likely and dark else None,
        "sum_over_true": round(lsum / len(dark), 2) if dark and lsum else None,
        "withheld_pairs": len(withheld),
        "withheld_precision": round(len(withheld & dark) / len(withheld), 3) if withheld else None,
        "stored_rows": stored,
        "content_matches": len(content) if texts else None,
        "content_precision": (round(len(content & dark) / len(content), 3) if content else None) if texts else None,
        "content_recall": round(len(content & dark) / len(dark), 3) if texts and dark else None,
        "content_recall_echoed": round(len(content & echoed) / len(echoed), 3) if texts and echoed else None,
        "tool_measured_precision": tiers.get("measured_precision"),
        "tool_reason": tiers.get("reason"),
    }


def run(
    args: argparse.Namespace, seed: int, ps: int, allocator: str | None, telemetry: str, echo: float | None
) -> dict[str, object]:
    name = f"s{seed}-ps{ps}-{allocator or 'default'}-{telemetry}" + (f"-echo{echo:g}" if echo is not None else "")
    sim = args.out / name
    if sim.exists():
        shutil.rmtree(sim)
    cmd = [str(BIN / "forensics"), "simulate", str(sim), "--seed", str(seed), "--requests", str(args.requests),
           "--page-size", str(ps), "--abort-rate", "0.05"]  # fmt: skip
    if allocator:
        cmd += ["--allocator", allocator]
    if echo is not None:  # prompt and response texts in a gateway format that carries them
        cmd += ["--gateway-format", "litellm_payload", "--echo-rate", str(echo), "--echo-noise", "0.1"]
    if telemetry == "one-dark":
        cmd += ["--no-telemetry", "decode-1"]
    subprocess.run(cmd, check=True, capture_output=True)
    if telemetry == "none":
        shutil.rmtree(sim / "bundle" / "pages", ignore_errors=True)
    res = subprocess.run(
        [str(BIN / "forensics"), "investigate", str(sim / "bundle"), "--out", str(sim / "out"), "--json", "--quiet"],
        check=True,
        capture_output=True,
        text=True,
    )
    summary = json.loads(res.stdout)
    return {"incident": name, "echo_rate": echo, **score(sim, sim / "out", summary, telemetry == "none")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[601])
    ap.add_argument("--page-sizes", type=int, nargs="+", default=[16])
    ap.add_argument("--allocators", nargs="+", default=[""], help="simulate --allocator ('' the release's own)")
    ap.add_argument("--echo-rates", type=float, nargs="*", default=[], help="also with gateway texts at these rates")
    ap.add_argument("--telemetry", nargs="+", default=["one-dark", "none"], choices=["one-dark", "none"])
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--out", type=Path, default=Path("/tmp/kvf-sources-eval"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for seed in args.seeds:
        for ps in args.page_sizes:
            for allocator in args.allocators:
                for telemetry in args.telemetry:
                    for echo in [None, *args.echo_rates]:
                        print(json.dumps(run(args, seed, ps, allocator or None, telemetry, echo)), flush=True)


if __name__ == "__main__":
    main()
