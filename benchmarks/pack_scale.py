"""`forensics pack` at 100,000 notified accounts (issue #51, "time to file"): a simulated incident's
investigate output scaled to N accounts, then the pack built on it and timed.

The scaled output is a copy of a small simulated incident's (`forensics simulate --seed S --requests R`,
investigated with a fixed --as-of) whose every notified account, its notice rows (notice_requests), its
findings rows (affected_responses.csv, exposures.csv) and their ids (finding_evidence) are copied K times,
the k-th copy's account and request ids suffixed `-x<k>` and its finding ids drawn again (the same
`ar-`/`ex-` and 16 hex digits: a digest of the id and the suffix), so that the notices, the evidence index
and the SIEM events grow as a larger incident's would; counts and times are the original rows'. The
notices are then rendered for the scaled accounts by `forensics notices` (as investigate would have), and
an operator's bundle.toml beside it maps every `--ca-every`-th notified account to US-CA (California's
form). What it makes is a benchmark input, not an incident: the ids repeat the original's shape.

    python benchmarks/pack_scale.py /tmp/kvf-pack100k                 # make it (minutes), once
    python benchmarks/pack_scale.py /tmp/kvf-pack100k --time 2        # then time `forensics pack` twice

WORK/out is the output folder, WORK/operator the operator's bundle, WORK/key.key the signing key; each
timed pack runs on a fresh copy of WORK/out (hard links: cheap), so the first run and a rerun (a previous
pack to replace) are both measured. Times are of the whole process (/usr/bin/time -v: user, system, wall,
peak RSS).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AS_OF = "2026-09-10T12:00:00Z"
SUFFIX = "'-x' || k"


def forensics(*args: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "forensics", *args], check=True, env=env, cwd=ROOT)


def _suffixed(columns: list[str]) -> str:
    """A REPLACE list giving each id column the copy's suffix (an empty or missing id stays as it is)."""
    return ", ".join(f"CASE WHEN coalesce({c}, '') = '' THEN {c} ELSE {c} || {SUFFIX} END AS {c}" for c in columns)


def scale(base: Path, out: Path, accounts: int) -> int:
    import duckdb

    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(base, out)
    shutil.rmtree(out / "notices", ignore_errors=True)  # rendered again below, for the scaled accounts
    con = duckdb.connect(str(out / "incident.duckdb"))
    try:
        con.execute("SET schema = 'internal'; SET search_path = 'internal,main'; SET TimeZone = 'UTC'")
        row = con.execute("SELECT count(DISTINCT account_id) FROM notice_requests").fetchone()
        k = -(-accounts // int(row[0] if row else 1))
        con.execute(
            f"""CREATE OR REPLACE TABLE notice_requests AS
                SELECT * EXCLUDE (k) REPLACE ({_suffixed(["account_id", "request_id"])})
                FROM notice_requests, range({k}) t(k) ORDER BY account_id, role, request_id"""
        )
        con.execute(
            f"""CREATE OR REPLACE TABLE finding_evidence AS
                SELECT * EXCLUDE (k) REPLACE ({_suffixed(["request_id", "source_request_id"])},
                    left(finding_id, 3) || left(sha256(finding_id || {SUFFIX}), 16) AS finding_id)
                FROM finding_evidence, range({k}) t(k)
                ORDER BY finding_file, request_id, source_request_id, node, kind, finding_id"""
        )
        ids = {
            "affected_responses.csv": ["request_id", "account_id"],
            "exposures.csv": ["recipient_request_id", "source_request_id", "recipient_account_id", "source_account_id"],
        }
        for name, columns in ids.items():
            path, tmp = out / name, out / f"{name}.tmp"
            con.execute(
                f"""COPY (SELECT * EXCLUDE (k) REPLACE ({_suffixed(columns)})
                          FROM read_csv($path, all_varchar = true, header = true), range({k}) t(k)
                          ORDER BY ALL) TO '{tmp}' (FORMAT csv, HEADER true)""",
                {"path": str(path)},
            )
            tmp.replace(path)
    finally:
        con.close()
    # the manifest as investigate would have written it for these files (not a link of the chain: the input)
    manifest = json.loads((out / "manifest.json").read_text())
    hashes = manifest["run"]["outputs_sha256"]
    for name in list(hashes):
        if name.startswith("notices/"):
            del hashes[name]
        elif (out / name).is_file():
            hashes[name] = hashlib.sha256((out / name).read_bytes()).hexdigest()
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    (out / "manifest.sig").unlink(missing_ok=True)
    return k


def operator_bundle(sim_bundle: Path, out: Path, folder: Path, every: int) -> int:
    """WORK/operator: the incident's bundle.toml with an accounts file mapping every `every`-th notified
    account (sorted) to US-CA."""
    with (out / "notices" / "mail_merge.csv").open(newline="", encoding="utf-8") as f:
        notified = sorted(r["account_id"] for r in csv.DictReader(f))
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    text = (sim_bundle / "bundle.toml").read_text()
    if not re.search(r"^\[disclosure\]", text, re.M):
        text += '\n[disclosure]\naccounts_file = "accounts.csv"\n'
    (folder / "bundle.toml").write_text(text)
    chosen = notified[::every]
    with (folder / "accounts.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["account_id", "jurisdiction", "residents"])
        w.writerows([a, "US-CA", 1] for a in chosen)
    return len(chosen)


def make(work: Path, args: argparse.Namespace) -> None:
    sim, base, out = work / "sim", work / "base", work / "out"
    if not (sim / "bundle").is_dir():
        forensics("simulate", str(sim), "--seed", str(args.seed), "--requests", str(args.requests))
    if not (base / "manifest.json").is_file():
        forensics("investigate", str(sim / "bundle"), "--out", str(base), "--as-of", AS_OF)
    k = scale(base, out, args.accounts)
    forensics("notices", str(out))
    n = operator_bundle(sim / "bundle", out, work / "operator", args.ca_every)
    if not (work / "key.key").is_file():
        forensics("keygen", str(work / "key"))
    print(f"{out}: every notified account copied {k} times; {n:,} accounts mapped to US-CA")


def _time(work: Path, label: str, target: Path) -> dict[str, str]:
    cmd = [
        "/usr/bin/time", "-v", sys.executable, "-m", "forensics", "pack", str(target),
        "--bundle", str(work / "operator"), "--sign-key", str(work / "key.key"),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(ROOT))}
    done = subprocess.run(cmd, check=True, env=env, cwd=ROOT, capture_output=True, text=True)
    got = {}
    for line in done.stderr.splitlines():
        key, _, value = line.strip().rpartition(": ")
        if key in ("User time (seconds)", "System time (seconds)", "Maximum resident set size (kbytes)"):
            got[key] = value
        elif key.startswith("Elapsed (wall clock) time"):
            got["wall"] = value
    print(label, done.stdout.strip().rsplit("; ", 1)[-1], got, flush=True)
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("work", type=Path)
    ap.add_argument("--accounts", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--requests", type=int, default=600)
    ap.add_argument("--ca-every", type=int, default=10)
    ap.add_argument("--time", type=int, default=0, help="time `forensics pack` N times (first run and rerun each)")
    args = ap.parse_args()
    work = args.work.resolve()
    if not (work / "out" / "notices" / "mail_merge.csv").is_file():
        make(work, args)
    for i in range(args.time):
        target = work / "timed"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(work / "out", target, copy_function=os.link)
        _time(work, f"run {i + 1}, first pack:", target)
        _time(work, f"run {i + 1}, rerun:     ", target)
        shutil.rmtree(target)


if __name__ == "__main__":
    main()
