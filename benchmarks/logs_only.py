"""Benchmark the logs-only path (issue #36): `forensics ingest` and `forensics investigate` on bundles of
SGLang logs and a gateway log without page events (`forensics simulate --scale`), per size, against a plain DuckDB scan
of the same bytes, and the cost of each doubling.

For every size of --sizes (client requests): generate the bundle once (cached in --work; its
truth/summary.json says what it holds, gen.json how fast it was written: the whole process), then
measure whole processes (wall time, peak RSS of the child by os.wait4, the load average before each
run: the machine is shared):
- ingest: `forensics ingest BUNDLE --db X` (KVF_PROFILE=1: the gateway and engine-log loads);
- investigate: `forensics investigate BUNDLE --out X` (KVF_PROFILE=1: its stages);
- the scan floor, median of 3 warm runs in one DuckDB process: every log file (engine/ and gateway/)
  read by read_csv as one VARCHAR column (SCAN), and the same with three regexp_extracts per line (the
  room, the rid and the record prefix's time: SCAN_RE).
Ratios: ingest / scan, ingest / regexp scan, investigate / regexp scan; MB/s of the bundle's bytes;
per doubling: (t2 / t1) ^ (1 / log2(n2 / n1)) between consecutive sizes. Results accumulate in
logs_only.json; the table between the logs markers of benchmarks/README.md is rebuilt from it.

    python benchmarks/logs_only.py                             # 100k, 200k, 400k, 1M requests
    python benchmarks/logs_only.py --sizes 2M --timeout 3600
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import PY, ROOT, fmt_size, forensics_bin, machine, measure, parse_size  # noqa: E402

BEGIN, END = "<!-- logs:begin -->", "<!-- logs:end -->"
READ = (
    "read_csv({files}, columns = {{'line': 'VARCHAR'}}, header = false, delim = '\\x01', quote = '', "
    "escape = '', auto_detect = false, strict_mode = false, null_padding = true, max_line_size = 67108864)"
)
SCAN_SQL = "SELECT count(*), sum(length(line)) FROM " + READ
SCAN_RE_SQL = (
    "SELECT count(*), count(regexp_extract(line, 'bootstrap_room[=\"'':]+ ?(\\d+)', 1)), "
    "count(regexp_extract(line, 'rid[=\"'':]+ ?''?([0-9a-f]{{32}})', 1)), "
    "count(regexp_extract(line, '^\\[(\\d{{4}}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d)', 1)) FROM " + READ
)
SCAN_SCRIPT = """
import duckdb, json, statistics, sys, time
files = json.loads(sys.argv[1])
con = duckdb.connect()
out = {{}}
for name, sql in (("scan", {scan!r}), ("scan_re", {scan_re!r})):
    q = sql.format(files="[" + ", ".join("'" + f + "'" for f in files) + "]")
    con.sql(q).fetchall()  # warm-up
    runs = []
    for _ in range(3):
        t = time.perf_counter(); res = con.sql(q).fetchall(); runs.append(time.perf_counter() - t)
    out[name] = {{"median": statistics.median(runs), "runs": runs, "result": [list(r) for r in res]}}
print(json.dumps(out))
"""


def ensure(work: Path, requests: int, seed: int, log) -> tuple[Path, dict]:
    d = work / f"logs-r{fmt_size(requests)}-s{seed}"
    summary_f, gen_f = d / "truth" / "summary.json", d / "gen.json"
    if summary_f.is_file() and gen_f.is_file():
        log(f"  cached {d}")
        return d, json.loads(summary_f.read_text()) | json.loads(gen_f.read_text())
    shutil.rmtree(d, ignore_errors=True)
    log(f"  generating {d} ...")
    cmd = [PY, "-m", "forensics", "simulate", str(d), "--scale", "--requests", str(requests), "--seed", str(seed)]
    r = measure(cmd, 7200)
    if r["rc"] != 0:
        raise SystemExit(f"generator failed:\n{r['output']}")
    meta = json.loads(summary_f.read_text())
    gen = {  # the whole process (start-up and the compiled renderer's load included)
        "gen_s": round(r["wall"], 1),
        "requests_per_s": round(requests / r["wall"]),
        "mb_per_s": round(meta["bytes"] / 1e6 / r["wall"], 1),
        "gen_rss_mb": round(r["rss_mb"]),
    }
    gen_f.write_text(json.dumps(gen, indent=1) + "\n")
    return d, meta | gen


def profile(output: str) -> dict[str, float]:
    """KVF_PROFILE=1 lines: top-level stages, ingest's loads (summed over files) and the findings' steps."""
    found: dict[str, float] = {}
    for line in output.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] == "[profile]" and parts[2].endswith("s"):
            name = parts[1]
            if "/" not in name or name.startswith(("ingest/load_", "findings/")) or name == "ingest/gateway_join":
                found[name] = found.get(name, 0.0) + float(parts[2][:-1])
    return {k: round(v, 2) for k, v in found.items()}


def guarded(cmd: list[str], timeout: float, rss_limit_mb: float, env: dict[str, str]) -> dict:
    """run.measure with a memory guard: the child (one process: cmd execs) is killed when its RSS passes
    rss_limit_mb, before the kernel's OOM killer picks some process of the shared machine."""
    p = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        env={**os.environ, **env},
    )  # fmt: skip
    t0, over, late, peak = time.perf_counter(), threading.Event(), threading.Event(), [0.0]

    def rss_mb() -> float:
        try:
            for ln in Path(f"/proc/{p.pid}/status").read_text().splitlines():
                if ln.startswith("VmRSS:"):
                    return int(ln.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    def watch() -> None:
        while p.poll() is None:
            peak[0] = max(peak[0], rss_mb())
            if peak[0] > rss_limit_mb or time.perf_counter() - t0 > timeout:
                (over if peak[0] > rss_limit_mb else late).set()
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                return
            time.sleep(0.5)

    w = threading.Thread(target=watch, daemon=True)
    w.start()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    w.join()
    return {
        "wall": time.perf_counter() - t0,
        "rss_mb": max(usage.ru_maxrss / 1024, peak[0]),
        "rc": p.returncode,
        "rss_limit": over.is_set(),
        "timeout": late.is_set(),
    }


def _proc(cmd: list[str], a, log, label: str) -> dict:
    """Whole process (its output to a file, read whole for the profile lines)."""
    load = os.getloadavg()[0]
    out_f = a.work / f"{label}.out"
    shell = "exec " + " ".join(shlex.quote(c) for c in cmd) + f" > {shlex.quote(str(out_f))} 2>&1"
    r = guarded(["sh", "-c", shell], a.timeout, a.rss_limit_gb * 1024, {"KVF_PROFILE": "1"})
    r["output"] = out_f.read_text(errors="replace") if out_f.is_file() else ""
    out_f.unlink(missing_ok=True)
    log(
        f"  {label}: {r['wall']:.1f} s, {r['rss_mb']:.0f} MB, rc {r['rc']}, load {load:.2f}"
        + (" TIMEOUT" if r["timeout"] else "")
        + (" RSS LIMIT" if r["rss_limit"] else "")
    )
    if r["rss_limit"]:
        status = f"stopped at {a.rss_limit_gb:g} GB RSS"
    else:
        status = "timeout" if r["timeout"] else "ok" if r["rc"] == 0 else f"failed (rc {r['rc']})"
    out = {"status": status, "wall": round(r["wall"], 2), "rss_mb": round(r["rss_mb"]), "load_before": round(load, 2)}
    if status != "ok":
        out["output"] = r["output"][-1500:]
    return out | {"profile": profile(r["output"])}


def run_one(requests: int, a, log) -> dict:
    d, meta = ensure(a.work, requests, a.seed, log)
    bundle = d / "bundle"
    files = sorted(str(f) for sub in ("engine", "gateway") for f in (bundle / sub).rglob("*") if f.is_file())
    size = sum(Path(f).stat().st_size for f in files)
    row = {
        "requests": requests,
        "lines": meta["lines"],
        "bytes": size,
        "files": len(files),
        "kinds": meta["kinds"],
        "gen_s": meta["gen_s"],
        "gen_requests_per_s": meta["requests_per_s"],
        "gen_mb_per_s": meta["mb_per_s"],
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    load = os.getloadavg()[0]
    r = measure([PY, "-c", SCAN_SCRIPT.format(scan=SCAN_SQL, scan_re=SCAN_RE_SQL), json.dumps(files)], a.timeout)
    if r["rc"] == 0:
        scans = json.loads(r["output"].strip().splitlines()[-1])
        row["scan"] = round(scans["scan"]["median"], 3)
        row["scan_re"] = round(scans["scan_re"]["median"], 3)
        row["scan_lines"] = scans["scan"]["result"][0][0]
        log(
            f"  scan {row['scan']:.2f} s, with regexps {row['scan_re']:.2f} s ({row['scan_lines']:,} lines), "
            f"load {load:.2f}"
        )
    else:
        row["scan"] = row["scan_re"] = None
        log(f"  scan failed: {r['output'][-500:]}")
    db = a.work / "logs-ingest.duckdb"
    db.unlink(missing_ok=True)
    if a.investigate_only:
        # investigate's own ingest stage stands for it (the table marks it so)
        row["ingest"] = {"status": "in investigate", "rss_mb": "-", "load_before": "-", "profile": {}}
    else:
        row["ingest"] = _proc([forensics_bin(), "ingest", str(bundle), "--db", str(db)], a, log, "ingest")
    db.unlink(missing_ok=True)
    (a.work / "manifest.json").unlink(missing_ok=True)
    out = a.work / "out-logs"
    shutil.rmtree(out, ignore_errors=True)
    limit = ["--memory-limit", a.memory_limit] if a.memory_limit else []
    row["investigate"] = _proc(
        [forensics_bin(), "investigate", str(bundle), "--out", str(out), *limit], a, log, "investigate"
    )
    row["memory_limit"] = a.memory_limit
    shutil.rmtree(out, ignore_errors=True)
    if not a.keep:
        shutil.rmtree(d, ignore_errors=True)
    return row


def _t(x: dict | None) -> float | None:
    return x["wall"] if x and x.get("status") == "ok" else None


def _ingest_s(r: dict) -> tuple[float | None, str]:
    """The ingest time and how it was had: its own process, or (--investigate-only) investigate's ingest
    stage, marked with an asterisk."""
    if r["ingest"].get("status") == "in investigate":
        t = r["investigate"].get("profile", {}).get("ingest")
        return (t, f"{t}*") if t else (None, "-")
    t = _t(r["ingest"])
    return t, str(t) if t else r["ingest"]["status"]


def _time(r: dict, name: str) -> float | None:
    """A row's seconds for one measurement: ingest as _ingest_s has it, a process's wall time, a scan's."""
    if name == "ingest":
        return _ingest_s(r)[0]
    return _t(r[name]) if isinstance(r.get(name), dict) else r.get(name)


def _r(a: float | None, b: float | None) -> str:
    return f"{a / b:.0f}" if a and b else "-"


def doublings(rows: list[dict]) -> list[str]:
    rows = sorted(rows, key=lambda r: r["requests"])
    out = []
    for r, s in zip(rows, rows[1:], strict=False):
        k = math.log2(s["requests"] / r["requests"])
        parts = []
        for name in ("ingest", "investigate", "scan", "scan_re"):
            t1, t2 = _time(r, name), _time(s, name)
            if t1 and t2:
                parts.append(f"{name} {(t2 / t1) ** (1 / k):.2f}x")
        out.append(
            f"{r['requests']:,} -> {s['requests']:,} requests ({k:.2f} doublings), per doubling: " + ", ".join(parts)
        )
    return out


def table(rows: list[dict]) -> str:
    head = (
        "| requests | lines | MB | files | gen s (req/s) | scan s | scan + 3 regexps s | ingest s | ingest RSS MB "
        "| ingest MB/s | ingest / scan | ingest / regexp scan | investigate s | investigate RSS MB "
        "| investigate / regexp scan | load before ingest, investigate |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    )
    lines = [head]
    for r in sorted(rows, key=lambda r: r["requests"]):
        (ing, ing_text), inv = _ingest_s(r), _t(r["investigate"])
        mb = r["bytes"] / 1e6
        lines.append(
            f"| {r['requests']:,} | {r['lines']:,} | {mb:,.0f} | {r['files']} "
            f"| {r['gen_s']} ({r['gen_requests_per_s']:,}) "
            f"| {r['scan'] if r['scan'] is not None else '-'} | {r['scan_re'] if r['scan_re'] is not None else '-'} "
            f"| {ing_text} | {r['ingest']['rss_mb']} "
            f"| {f'{mb / ing:.1f}' if ing else '-'} | {_r(ing, r['scan'])} | {_r(ing, r['scan_re'])} "
            f"| {inv if inv else r['investigate']['status']} | {r['investigate']['rss_mb']} | {_r(inv, r['scan_re'])} "
            f"| {r['ingest']['load_before']}, {r['investigate']['load_before']} |"
        )
    return "\n".join(lines)


def stage_lines(rows: list[dict]) -> list[str]:
    out = []
    for r in sorted(rows, key=lambda r: r["requests"]):
        inv = r["investigate"].get("profile", {})
        ing = r["ingest"].get("profile") or inv  # --investigate-only: investigate's ingest loads
        # load_engine: the bulk reader (forensics.ingest.bulk); load_engine_log/_requests: the per-line one
        keys = ("ingest/load_gateway", "ingest/load_engine", "ingest/load_engine_log", "ingest/load_engine_requests",
                "ingest/gateway_join")  # fmt: skip
        a = ", ".join(f"{k.split('/')[1]} {ing[k]}" for k in keys if k in ing)
        b = ", ".join(
            f"{k} {inv[k]}"
            for k in ("ingest", "cohorts", "ownership", "findings", "write_findings", "report", "publish")
            if k in inv
        )
        out.append(f"{r['requests']:,} requests: ingest's loads (s): {a or '-'}; investigate's stages (s): {b or '-'}")
    return out


def render(rows: list[dict], readme: Path) -> None:
    mach = machine()
    body = [
        BEGIN,
        "",
        "## Logs only (issue #36)",
        "",
        f"Machine: {mach['nproc']} cores, {mach['memory']}; Python {mach['python']}, DuckDB {mach['duckdb']}. "
        "Shared with other workers running tests while measured (contended): the load average before each "
        "run is in the last column; one run each.",
        "Bundles from `forensics simulate OUT --scale --requests N --seed 1` (16 decode + 8 prefill nodes, 14 days, "
        "rotated daily, LiteLLM and Envoy gateway logs, no page events). Whole processes: "
        "`KVF_PROFILE=1 forensics ingest BUNDLE --db X` and `KVF_PROFILE=1 forensics investigate BUNDLE --out X`. "
        "scan: every file of engine/ and gateway/ through DuckDB's read_csv as one VARCHAR column; with "
        "3 regexps: the same plus regexp_extract of the room, the rid and the prefix time per line "
        "(median of 3 warm runs in one process). An ingest time marked * is investigate's ingest stage "
        "(`--investigate-only`: no separate ingest run; its RSS is investigate's).",
        "",
        table(rows),
        "",
        "Per doubling (time ratio per doubling of the requests):",
        "",
        *[f"- {d}" for d in doublings(rows)],
        "",
        "Where the time goes (KVF_PROFILE=1):",
        "",
        *[f"- {s}" for s in stage_lines(rows)],
        "",
        "Produced by:",
        "",
        "```",
        "python benchmarks/logs_only.py --sizes "
        + ",".join(fmt_size(r["requests"]) for r in sorted(rows, key=lambda r: r["requests"])),
        "```",
        "",
        END,
    ]
    text = readme.read_text() if readme.is_file() else ""
    if BEGIN in text:
        text = text[: text.index(BEGIN)] + "\n".join(body) + text[text.index(END) + len(END) :]
    else:
        text = text.rstrip("\n") + "\n\n" + "\n".join(body) + "\n"
    readme.write_text(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="100k,200k,400k,1M", help="client requests, comma-separated")
    ap.add_argument("--work", type=Path, default=Path("/tmp/kvf-bench"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--rss-limit-gb", type=float, default=16.0, help="stop a run whose RSS passes this")
    ap.add_argument("--memory-limit", default=None, help="investigate's --memory-limit (e.g. 8GB; default: its own)")
    ap.add_argument("--keep", action="store_true", help="keep the generated bundles (about 4.7 GB per 1M requests)")
    ap.add_argument("--results", type=Path, default=HERE / "logs_only.json")
    ap.add_argument("--readme", type=Path, default=HERE / "README.md")
    ap.add_argument("--render-only", action="store_true", help="rebuild the table from --results")
    ap.add_argument(
        "--investigate-only", action="store_true",
        help="skip the separate ingest run; the table shows investigate's ingest stage (marked *) in its place",
    )  # fmt: skip
    a = ap.parse_args(argv)
    a.work.mkdir(parents=True, exist_ok=True)
    stored = json.loads(a.results.read_text()) if a.results.is_file() else {"rows": []}

    def log(msg: str) -> None:
        print(msg, flush=True)

    for size in [] if a.render_only else [parse_size(s) for s in a.sizes.split(",")]:
        log(f"{fmt_size(size)} requests")
        row = run_one(size, a, log)
        stored["rows"] = [r for r in stored["rows"] if r["requests"] != row["requests"]] + [row]
        a.results.write_text(json.dumps(stored, indent=1) + "\n")
    if stored["rows"]:
        render(stored["rows"], a.readme)
    log(f"wrote {a.readme}, {a.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
