"""Benchmark `forensics investigate` against a plain DuckDB scan and a per-event replay peer.

For each size (page events), generate a bundle once (cached in --work), then measure:
- investigate: whole-process wall time and peak RSS of `forensics investigate BUNDLE --out X`
  (median of --repeat runs; killed and recorded as "timeout" after --timeout seconds);
- scan: a plain DuckDB scan of the same files reading the columns the analysis needs
  (SCAN_SQL; median of 3 runs after one warm-up, inside one process);
- R = investigate / scan; analysis (ingest + ownership + findings, from KVF_PROFILE=1) and R analysis;
- peer: whole-process wall time and peak RSS of benchmarks/replay_peer.py (sizes up to --peer-max).

Results accumulate in benchmarks/results.json (keyed by size and generator settings); the table in
benchmarks/README.md (between the bench markers) and benchmarks/results.svg are rebuilt from it.

    python benchmarks/run.py                      # 2M and 10M events
    python benchmarks/run.py --sizes 100M --timeout 1800
    python benchmarks/run.py --sizes 1B --repeat 1
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PY = sys.executable
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
# the bundles: forensics/simulate/pages
SIMULATE = [PY, "-m", "forensics", "simulate", "--scale"]

SCAN_SQL = (
    'SELECT count(*), sum(seq), sum(start), sum("end"), count(DISTINCT op), sum(room), '
    "count(DISTINCT node), max(ts) FROM read_parquet({files})"
)
SCAN_SCRIPT = """
import duckdb, json, statistics, sys, time
files = json.loads(sys.argv[1])
con = duckdb.connect()
q = {sql!r}.format(files="[" + ", ".join("'" + f + "'" for f in files) + "]")
con.sql(q).fetchall()  # warm-up
runs = []
for _ in range(3):
    t = time.perf_counter(); con.sql(q).fetchall(); runs.append(time.perf_counter() - t)
print(json.dumps({{"median": statistics.median(runs), "runs": runs}}))
"""


def parse_size(s: str) -> int:
    s = s.strip().upper()
    mult = {"K": 10**3, "M": 10**6, "G": 10**9, "B": 10**9}
    return int(float(s[:-1]) * mult[s[-1]]) if s[-1] in mult else int(s)


def fmt_size(n: int) -> str:
    for div, suf in ((10**9, "B"), (10**6, "M"), (10**3, "K")):
        if n >= div and n % (div // 10) == 0:
            return f"{n / div:g}{suf}"
    return str(n)


def measure(cmd: list[str], timeout: float, cwd: Path = ROOT, env: dict[str, str] | None = None) -> dict:
    """Run cmd; wall time, peak RSS (MB) of the child (os.wait4), exit code; kill its group on timeout."""
    t0 = time.perf_counter()
    p = subprocess.Popen(
        cmd,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, **(env or {})},
    )
    timed_out = threading.Event()

    def kill():
        timed_out.set()
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    timer = threading.Timer(timeout, kill)
    timer.start()
    out = b""
    try:
        out = p.stdout.read()  # until the child closes stdout (exits or is killed)
        _, status, usage = os.wait4(p.pid, 0)
    finally:
        timer.cancel()
    p.returncode = os.waitstatus_to_exitcode(status)
    return {
        "wall": time.perf_counter() - t0,
        "rss_mb": usage.ru_maxrss / 1024,
        "rc": p.returncode,
        "timeout": timed_out.is_set(),
        "output": out.decode(errors="replace")[-2000:],
        "stages": stages(out.decode(errors="replace")),
    }


STAGES = ("ingest", "ownership", "findings", "write_findings", "report")


def stages(output: str) -> dict[str, float]:
    """Stage times from investigate's KVF_PROFILE=1 lines ("[profile] ownership 12.3s faults 812 sys 0.40s")."""
    found: dict[str, float] = {}
    for line in output.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] == "[profile]" and parts[1] in STAGES and parts[2].endswith("s"):
            found[parts[1]] = float(parts[2][:-1])
    return found


def median_runs(runs: list[dict]) -> dict:
    if any(r["timeout"] for r in runs):  # the peak RSS until the kill is still worth keeping
        return {
            "status": "timeout",
            "limit": round(max(r["wall"] for r in runs)),
            "rss_mb": max(r["rss_mb"] for r in runs),
            "runs": [r["wall"] for r in runs],
        }
    if any(r["rc"] != 0 for r in runs):
        bad = next(r for r in runs if r["rc"] != 0)
        return {"status": f"failed (rc {bad['rc']})", "runs": [r["wall"] for r in runs], "output": bad["output"]}
    result = {
        "status": "ok",
        "wall": statistics.median(r["wall"] for r in runs),
        "rss_mb": max(r["rss_mb"] for r in runs),
        "runs": [round(r["wall"], 2) for r in runs],
    }
    names = sorted({k for r in runs for k in r.get("stages", {})})
    if names:  # median per stage; analysis = ingest + ownership + findings (no CSV or report writing)
        med = {k: round(statistics.median(r["stages"].get(k, 0.0) for r in runs), 2) for k in names}
        med["analysis"] = round(sum(med.get(k, 0.0) for k in ("ingest", "ownership", "findings")), 2)
        result["stages"] = med
    return result


def ensure_bundle(work: Path, events: int, nodes: int, rate: float, seed: int, log) -> tuple[Path, dict]:
    d = work / f"e{events}-n{nodes}-p{rate:g}-s{seed}"
    meta_f = d / "truth" / "summary.json"
    if meta_f.is_file():
        meta = json.loads(meta_f.read_text())
        if meta.get("nodes") == nodes and meta.get("seed") == seed and meta.get("placeholder_rate") == rate:
            log(f"  cached bundle {d} ({meta['events']} events)")
            return d, meta
    shutil.rmtree(d, ignore_errors=True)
    log(f"  generating {d} ...")
    r = measure(
        [
            *SIMULATE,
            str(d),
            "--page-events",
            "uniform",
            "--events",
            str(events),
            "--decode-nodes",
            str(nodes),
            "--placeholder-rate",
            str(rate),
            "--seed",
            str(seed),
        ],
        timeout=7200,
    )
    if r["rc"] != 0:
        raise SystemExit(f"generator failed:\n{r['output']}")
    meta = json.loads(meta_f.read_text())
    meta["gen_wall"], meta["gen_rss_mb"] = r["wall"], r["rss_mb"]
    meta_f.write_text(json.dumps(meta, indent=1))
    log(f"  generated in {r['wall']:.1f} s, peak {r['rss_mb']:.0f} MB")
    return d, meta


def forensics_bin() -> str:
    cand = Path(PY).parent / "forensics"
    return str(cand) if cand.exists() else "forensics"


def run_size(events: int, a, log) -> dict:
    d, meta = ensure_bundle(a.work, events, a.nodes, a.placeholder_rate, a.seed, log)
    bundle = d / "bundle"
    repeat = a.repeat or (3 if events <= 10_000_000 else 1)
    files = sorted(str(f) for f in (bundle / "pages").glob("*.parquet"))
    row: dict = {
        "events": meta["events"],
        "requests": meta["requests"],
        "nodes": a.nodes,
        "placeholder_rate": a.placeholder_rate,
        "placeholders": meta["placeholders"],
        "gen_wall": meta.get("gen_wall"),
        "repeat": repeat,
        "pages_mb": round(sum(os.path.getsize(f) for f in files) / 2**20, 1),
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    # scan first: it also warms the page cache for investigate
    r = measure([PY, "-c", SCAN_SCRIPT.format(sql=SCAN_SQL), json.dumps(files)], timeout=a.timeout)
    row["scan"] = json.loads(r["output"].strip().splitlines()[-1])["median"] if r["rc"] == 0 else None
    log(f"  scan: {row['scan']}")
    runs = []
    out = a.work / f"out-{events}"
    for i in range(repeat):
        shutil.rmtree(out, ignore_errors=True)
        res = measure(
            [forensics_bin(), "investigate", str(bundle), "--out", str(out)],
            timeout=a.timeout,
            env={"KVF_PROFILE": "1"},
        )
        log(
            f"  investigate run {i + 1}/{repeat}: {res['wall']:.1f} s, {res['rss_mb']:.0f} MB, rc {res['rc']}"
            + (" TIMEOUT" if res["timeout"] else "")
        )
        runs.append(res)
        if res["timeout"] or res["rc"] != 0:
            if res["rc"] != 0 and not res["timeout"]:
                log(res["output"])
            break
    row["investigate"] = median_runs(runs)
    if row["investigate"]["status"] == "ok":
        summary = [ln for ln in runs[-1]["output"].splitlines() if ln.startswith(("Affected", "Exposure"))]
        row["investigate_summary"] = " / ".join(summary)
    shutil.rmtree(out, ignore_errors=True)
    if events <= a.peer_max:
        pruns = []
        for i in range(a.peer_repeat or repeat):
            res = measure([PY, str(HERE / "replay_peer.py"), str(bundle)], timeout=a.timeout)
            log(
                f"  peer run {i + 1}: {res['wall']:.1f} s, {res['rss_mb']:.0f} MB, rc {res['rc']}"
                + (" TIMEOUT" if res["timeout"] else "")
            )
            pruns.append(res)
            if res["timeout"] or res["rc"] != 0:
                break
        row["peer"] = median_runs(pruns)
        if row["peer"]["status"] == "ok":
            row["peer"]["result"] = json.loads(pruns[-1]["output"].strip().splitlines()[-1])
    else:
        row["peer"] = {"status": "skipped"}
    return row


def machine() -> dict:
    model = "?"
    mem = "?"
    try:
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            if ln.startswith("model name"):
                model = ln.split(":", 1)[1].strip()
                break
        for ln in Path("/proc/meminfo").read_text().splitlines():
            if ln.startswith("MemTotal"):
                mem = f"{int(ln.split()[1]) / 2**20:.1f} GiB"
    except OSError:
        pass
    try:
        import duckdb

        ddb = duckdb.__version__
    except ImportError:
        ddb = "?"
    return {
        "nproc": os.cpu_count(),
        "memory": mem,
        "cpu": model,
        "python": platform.python_version(),
        "duckdb": ddb,
        "kernel": platform.release(),
    }


# ---------------------------------------------------------------- rendering


def _cell(x: dict, key: str = "wall", fmt: str = "{:.1f}") -> str:
    if x and x.get("status") == "timeout":
        return (
            f"timeout (>{x.get('limit', '?')} s)"
            if key == "wall"
            else (f">{x['rss_mb']:.0f} at kill" if "rss_mb" in x else "-")
        )
    if not x or x.get("status") != "ok":
        return (x or {}).get("status", "-")
    return fmt.format(x[key])


def table(rows: list[dict]) -> str:
    out = [
        "| events | nodes (P+D) | placeholders | investigate s | analysis s | peak RSS MB | scan s | R | "
        "R analysis | peer s | peer RSS MB | peer / investigate | gen s |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in sorted(rows, key=lambda r: (r["events"], r["nodes"])):
        inv, peer = r["investigate"], r.get("peer", {})
        R = f"{inv['wall'] / r['scan']:.0f}" if inv.get("status") == "ok" and r.get("scan") else "-"
        analysis = inv.get("stages", {}).get("analysis") if inv.get("status") == "ok" else None
        Ra = f"{analysis / r['scan']:.0f}" if analysis and r.get("scan") else "-"
        pr = f"{peer['wall'] / inv['wall']:.1f}x" if peer.get("status") == "ok" and inv.get("status") == "ok" else "-"
        out.append(
            " | ".join(
                [
                    f"| {r['events']:,}",
                    f"{r['nodes']}+{r['nodes']}",
                    f"{r['placeholders']:,} ({r['placeholder_rate']:g})",
                    _cell(inv) + (f" (n={len(inv.get('runs', []))})" if inv.get("status") == "ok" else ""),
                    f"{analysis:.1f}" if analysis else "-",
                    _cell(inv, "rss_mb", "{:.0f}"),
                    f"{r['scan']:.2f}" if r.get("scan") else "-",
                    R,
                    Ra,
                    _cell(peer),
                    _cell(peer, "rss_mb", "{:.0f}"),
                    pr,
                    f"{r['gen_wall']:.0f}" if r.get("gen_wall") else "-",
                ]
            )
            + " |"
        )
    return "\n".join(out)


def svg(rows: list[dict], path: Path) -> None:
    """Log-log plot of seconds vs events, one polyline per series."""
    series = {
        "investigate": ("#c0392b", lambda r: r["investigate"].get("wall")),
        "scan (DuckDB)": ("#2471a3", lambda r: r.get("scan")),
        "replay peer": ("#229954", lambda r: r.get("peer", {}).get("wall")),
    }
    pts = {name: sorted((r["events"], f(r)) for r in rows if f(r)) for name, (_c, f) in series.items()}
    # investigate runs killed at the timeout: hollow markers at the limit (a lower bound)
    killed = sorted(
        (r["events"], r["investigate"]["limit"])
        for r in rows
        if r["investigate"].get("status") == "timeout" and r["investigate"].get("limit")
    )
    xs = [x for p in pts.values() for x, _ in p] + [x for x, _ in killed] or [1e6, 1e7]
    ys = [y for p in pts.values() for _, y in p] + [y for _, y in killed] or [0.1, 10]
    x0, x1 = math.floor(math.log10(min(xs))), math.ceil(math.log10(max(xs)))
    y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    x1, y1 = max(x1, x0 + 1), max(y1, y0 + 1)
    W, H, L, B, T, Rm = 640, 420, 70, 50, 30, 170

    def px(x):
        return L + (math.log10(x) - x0) / (x1 - x0) * (W - L - Rm)

    def py(y):
        return H - B - (math.log10(y) - y0) / (y1 - y0) * (H - B - T)

    el = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" '
        f'font-size="12"><rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{L}" y="18" font-size="14">KV Forensics: wall time vs page events (log-log)</text>',
    ]
    for e in range(x0, x1 + 1):
        x = px(10**e)
        el.append(f'<line x1="{x:.1f}" y1="{T}" x2="{x:.1f}" y2="{H - B}" stroke="#ddd"/>')
        el.append(f'<text x="{x:.1f}" y="{H - B + 16}" text-anchor="middle">1e{e}</text>')
    for e in range(y0, y1 + 1):
        y = py(10**e)
        el.append(f'<line x1="{L}" y1="{y:.1f}" x2="{W - Rm}" y2="{y:.1f}" stroke="#ddd"/>')
        el.append(f'<text x="{L - 6}" y="{y + 4:.1f}" text-anchor="end">{10**e:g} s</text>')
    el.append(f'<rect x="{L}" y="{T}" width="{W - L - Rm}" height="{H - B - T}" fill="none" stroke="#333"/>')
    el.append(f'<text x="{(L + W - Rm) / 2}" y="{H - 12}" text-anchor="middle">page events</text>')
    for i, (name, (color, _f)) in enumerate(series.items()):
        p = pts[name]
        if p:
            coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in p)
            el.append(f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="2"/>')
            el += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5" fill="{color}"/>' for x, y in p]
        if name == "investigate":
            el += [
                f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="5" fill="white" stroke="{color}" '
                f'stroke-width="2"/><text x="{px(x) + 8:.1f}" y="{py(y) - 8:.1f}" fill="{color}">'
                f"&gt;{y:g} s (killed)</text>"
                for x, y in killed
            ]
        ly = T + 20 + 20 * i
        el.append(
            f'<line x1="{W - Rm + 15}" y1="{ly}" x2="{W - Rm + 40}" y2="{ly}" stroke="{color}" '
            f'stroke-width="2"/><text x="{W - Rm + 46}" y="{ly + 4}">{name}</text>'
        )
    el.append("</svg>")
    path.write_text("\n".join(el) + "\n")


def render_readme(rows: list[dict], mach: dict, commands: list[str], readme: Path, notes: list[str] = ()) -> None:
    body = (
        [
            BEGIN,
            "",
            "## Results",
            "",
            f"Machine: {mach['nproc']} cores ({mach['cpu']}), {mach['memory']} RAM; Python {mach['python']}, "
            f"DuckDB {mach['duckdb']}, Linux {mach['kernel']}.",
            "",
            "Bundles from `forensics simulate OUT --scale --page-events uniform --events N --decode-nodes 2 "
            "--placeholder-rate 0.002` unless the row says "
            "otherwise (P+D = prefill + decode nodes). Times are seconds of wall clock: investigate and peer "
            "are whole processes (median of n runs; peak RSS of the process); scan is the median of 3 warm "
            "runs of the query below; R = investigate / scan. analysis = ingest + ownership + findings (the "
            "stage times investigate prints with KVF_PROFILE=1: without writing the CSVs and the report); "
            "R analysis = analysis / scan.",
            "",
            table(rows),
            "",
        ]
        + [f"- {n}" for n in notes]
        + ([""] if notes else [])
        + [
            "Scan query (one DuckDB process, default threads):",
            "",
            "```sql",
            SCAN_SQL.format(files="[...pages/*.parquet]"),
            "```",
            "",
            "Produced by:",
            "",
            "```",
        ]
        + commands
        + ["```", "", "![time vs events](results.svg)", "", END]
    )
    text = readme.read_text() if readme.is_file() else ""
    block = "\n".join(body)
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + block + text[text.index(END) + len(END) :]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    readme.write_text(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="2M,10M", help="comma list of page-event counts: 2M,10M,100M,1B")
    ap.add_argument("--work", type=Path, default=Path("/tmp/kvf-bench"), help="bundle cache and scratch")
    ap.add_argument("--repeat", type=int, help="runs per measurement (default 3 up to 10M, else 1)")
    ap.add_argument("--peer-repeat", type=int, help="runs of the peer (default: --repeat)")
    ap.add_argument("--peer-max", type=parse_size, default=10_000_000, help="largest size for the peer")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per investigate/peer run")
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--placeholder-rate", type=float, default=0.002)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--results", type=Path, default=HERE / "results.json")
    ap.add_argument("--readme", type=Path, default=HERE / "README.md")
    ap.add_argument("--svg", type=Path, default=HERE / "results.svg")
    ap.add_argument("--render-only", action="store_true", help="rebuild README table and SVG from --results")
    a = ap.parse_args(argv)
    a.work.mkdir(parents=True, exist_ok=True)
    if a.render_only:
        stored = json.loads(a.results.read_text())
        render_readme(stored["rows"], stored["machine"], stored["commands"], a.readme, stored.get("notes", []))
        svg(stored["rows"], a.svg)
        print(table(stored["rows"]))
        return 0

    def log(msg: str) -> None:
        print(msg, flush=True)

    stored = json.loads(a.results.read_text()) if a.results.is_file() else {"rows": [], "commands": []}
    cmd = "python benchmarks/run.py " + " ".join(argv if argv is not None else sys.argv[1:])
    for size in [parse_size(s) for s in a.sizes.split(",") if s.strip()]:
        log(f"== {fmt_size(size)} page events")
        row = run_size(size, a, log)
        stored["rows"] = [
            r
            for r in stored["rows"]
            if (r["events"], r["nodes"], r["placeholder_rate"])
            != (row["events"], row["nodes"], row["placeholder_rate"])
        ] + [row]
        a.results.write_text(json.dumps(stored, indent=1))
    stored["machine"] = machine()
    if cmd.strip() not in stored["commands"]:
        stored["commands"].append(cmd.strip())
    a.results.write_text(json.dumps(stored, indent=1))
    print(table(stored["rows"]))
    render_readme(stored["rows"], stored["machine"], stored["commands"], a.readme, stored.get("notes", []))
    svg(stored["rows"], a.svg)
    log(f"wrote {a.readme}, {a.svg}, {a.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
