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
  possible_sources;
- the headline: the distinct true responses its rows are against its bounds (at least affected less
  possible_overlap, the largest matching of rooms and records: response_bounds, at most affected).
The tool's ids are the gateway's as logged: a format that renames requests (truth/gateway_ids.csv) is
read back to the simulator's ids through that map, and a row keyed by its room ("room:<room>", or the rid
its decode node logged) through truth's rooms, so a renamed id is neither a miss nor a false hit.

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


def truth_ids(truth: Path) -> tuple[dict[str, str], dict[str, str]]:
    """The simulator's request id of each id the gateway logged (truth/gateway_ids.csv, where the format
    renames them), and of each room (a row no gateway record names is keyed by its room)."""
    ids = truth / "gateway_ids.csv"
    renamed = {r["format_request_id"]: r["spec_request_id"] for r in _rows(ids)} if ids.exists() else {}
    rooms = {r["room"]: r["request_id"] for r in _rows(truth / "responses.csv") if r["room"]}
    return renamed, rooms


def to_truth(renamed: dict[str, str], rooms: dict[str, str], request_id: str, room: object) -> str:
    """A row's or pair side's id read back to the simulator's: through the gateway's renaming, else the
    room it names where its id is the room's key (no gateway record names it)."""
    if request_id in renamed:
        return renamed[request_id]
    if (request_id.startswith("room:") or not request_id) and room is not None and str(room) in rooms:
        return rooms[str(room)]
    return request_id


def score(truth: Path, out: Path) -> dict[str, object]:
    resp = {r["request_id"]: r for r in _rows(truth / "responses.csv")}
    pairs = {(r["recipient_request_id"], r["source_request_id"]) for r in _rows(truth / "exposures.csv")}
    exposed = {k for k, r in resp.items() if r["exposed"] == "1"}
    renamed, rooms = truth_ids(truth)

    def t(request_id: str | None, room: object) -> str:
        return to_truth(renamed, rooms, request_id or "", room)

    con = duckdb.connect(str(out / "incident.duckdb"), read_only=True)
    try:
        rows = con.execute("SELECT request_id, room, status FROM affected_responses").fetchall()
        ex = [
            (t(a, ra), t(b, rb), s)
            for a, ra, b, rb, s in con.execute(
                "SELECT recipient_request_id, recipient_room, source_request_id, source_room, status FROM exposures"
            ).fetchall()
        ]
        possible = {
            (t(a, ra), t(b, rb))
            for a, ra, b, rb in con.execute(
                "SELECT recipient_request_id, recipient_room, source_request_id, source_room FROM possible_sources"
            ).fetchall()
        }
        affected, overlap = con.execute(
            "SELECT count(DISTINCT request_id), (SELECT responses - responses_least FROM internal.response_bounds "
            "WHERE scope = 'all') FROM affected_responses"
        ).fetchone()
    finally:
        con.close()
    aff: dict[str, str] = {}
    for request_id, room, status in rows:  # one response in two rows: the stronger status
        k = t(request_id, room)
        aff[k] = "confirmed" if "confirmed" in (status, aff.get(k)) else status
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
        "headline_low": affected - overlap,
        "headline_high": affected,
        "true_distinct": len(aff),
        "within_bounds": affected - overlap <= len(aff) <= affected,
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
            "possible_pairs", "headline_low", "headline_high", "true_distinct", "within_bounds"]  # fmt: skip
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in results:
        print("| " + " | ".join("n/a" if r[c] is None else str(r[c]) for c in cols) + " |")


if __name__ == "__main__":
    main()
