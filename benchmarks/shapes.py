"""Benchmark `forensics investigate` on bundles shaped like real incidents (`forensics simulate --scale
--page-events realistic`), per size and concurrency, against a plain DuckDB scan and both peers
(numpy_peer.py, the vectorized numpy replay; replay_peer.py, the per-event loop), and the cost of each
doubling.

For every (events, concurrency) of --grid: generate the bundle once (cached in --work), then measure
whole processes (wall time, peak RSS): investigate, numpy_peer, replay_peer (up to --peer-max
events), and the scan (median of 3 warm runs in one process). Ratios: investigate / numpy peer,
investigate / scan (R). Doublings: the time ratio between two rows of the grid whose events double
at the same concurrency, or whose concurrency doubles at the same events. Results accumulate in
shapes.json; the table between the shapes markers of benchmarks/README.md and shapes.svg (time
against events, one line per concurrency) are rebuilt from it.

    python benchmarks/shapes.py                           # 2M and 4M events at 300 rooms, 2M at 600
    python benchmarks/shapes.py --grid 100M@300 --peer-max 0 --timeout 7200
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import PY, SCAN_SCRIPT, SCAN_SQL, fmt_size, forensics_bin, machine, measure, parse_size  # noqa: E402

BEGIN, END = "<!-- shapes:begin -->", "<!-- shapes:end -->"


def grid(text: str) -> list[tuple[int, int]]:
    """'2M@300,4M@300,2M@600' -> [(events, concurrency), ...]."""
    out = []
    for item in text.split(","):
        size, _, conc = item.strip().partition("@")
        out.append((parse_size(size), int(conc or 300)))
    return out


def ensure(work: Path, events: int, conc: int, seed: int, log) -> tuple[Path, dict]:
    d = work / f"real-e{fmt_size(events)}-c{conc}-s{seed}"
    meta_f = d / "truth" / "summary.json"
    if meta_f.is_file():
        log(f"  cached {d}")
        return d, json.loads(meta_f.read_text())
    shutil.rmtree(d, ignore_errors=True)
    log(f"  generating {d} ...")
    cmd = [PY, "-m", "forensics", "simulate", str(d), "--scale", "--page-events", "realistic", "--events", str(events)]
    cmd += ["--concurrency", str(conc)]
    r = measure([*cmd, "--seed", str(seed)], timeout=7200)
    if r["rc"] != 0:
        raise SystemExit(f"generator failed:\n{r['output']}")
    meta = json.loads(meta_f.read_text())
    meta["gen_wall"], meta["gen_rss_mb"] = round(r["wall"], 1), round(r["rss_mb"])
    meta_f.write_text(json.dumps(meta, indent=1))
    return d, meta


def _proc(cmd: list[str], timeout: float, log, label: str, env: dict | None = None) -> dict:
    r = measure(cmd, timeout=timeout, env=env)
    log(f"  {label}: {r['wall']:.1f} s, {r['rss_mb']:.0f} MB, rc {r['rc']}" + (" TIMEOUT" if r["timeout"] else ""))
    status = "timeout" if r["timeout"] else "ok" if r["rc"] == 0 else f"failed (rc {r['rc']})"
    return {"status": status, "wall": round(r["wall"], 2), "rss_mb": round(r["rss_mb"])}


def run_one(events: int, conc: int, a, log) -> dict:
    d, meta = ensure(a.work, events, conc, a.seed, log)
    bundle = d / "bundle"
    files = sorted(str(f) for f in (bundle / "pages").glob("*.parquet"))
    row = {
        "events": meta["events"],
        "concurrency": conc,
        "inflight": meta.get("inflight_mean"),
        "ranges_per_alloc": (meta.get("ranges_per_alloc") or {}).get("decode"),
        "requests": meta.get("requests"),
        "gen_wall": meta.get("gen_wall"),
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    r = measure([PY, "-c", SCAN_SCRIPT.format(sql=SCAN_SQL), json.dumps(files)], timeout=a.timeout)
    row["scan"] = json.loads(r["output"].strip().splitlines()[-1])["median"] if r["rc"] == 0 else None
    out = a.work / "out-shapes"
    shutil.rmtree(out, ignore_errors=True)
    row["investigate"] = _proc(
        [forensics_bin(), "investigate", str(bundle), "--out", str(out)], a.timeout, log, "investigate"
    )
    shutil.rmtree(out, ignore_errors=True)
    for name, script in (("numpy_peer", "numpy_peer.py"), ("loop_peer", "replay_peer.py")):
        if events <= a.peer_max:
            row[name] = _proc([PY, str(HERE / script), str(bundle)], a.timeout, log, name)
        else:
            row[name] = {"status": "skipped"}
    return row


def _t(x: dict | None) -> float | None:
    return x["wall"] if x and x.get("status") == "ok" else None


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "-"


def doublings(rows: list[dict]) -> list[str]:
    """Investigate's time ratio for each pair of rows that doubles events at one concurrency, or
    concurrency at (about) the same events."""
    out = []
    for r in rows:
        for s in rows:
            ti, si = _t(r["investigate"]), _t(s["investigate"])
            if not ti or not si:
                continue
            if s["concurrency"] == r["concurrency"] and 1.8 <= s["events"] / r["events"] <= 2.2:
                out.append(
                    f"events {r['events']:,} -> {s['events']:,} at {r['concurrency']} rooms: "
                    f"{si / ti:.2f}x (goal <= 2.1x)"
                )
            if s["concurrency"] == 2 * r["concurrency"] and 0.9 <= s["events"] / r["events"] <= 1.1:
                out.append(
                    f"rooms in flight {r['concurrency']} -> {s['concurrency']} at {r['events']:,} events: "
                    f"{si / ti:.2f}x (goal <= 1.3x)"
                )
    return out


def table(rows: list[dict]) -> str:
    head = (
        "| events | rooms in flight (asked / measured) | ranges per alloc | investigate s | peak RSS MB | scan s | R "
        "| numpy peer s | investigate / numpy peer | loop peer s | investigate / loop peer |\n"
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    lines = [head]
    for r in sorted(rows, key=lambda r: (r["concurrency"], r["events"])):
        inv, npy, loop = _t(r["investigate"]), _t(r["numpy_peer"]), _t(r["loop_peer"])
        mean = r.get("inflight")
        scan = f"{r['scan']:.3f}" if r["scan"] is not None else "-"
        lines.append(
            f"| {r['events']:,} | {r['concurrency']} / {mean if mean is not None else '-'} "
            f"| {r.get('ranges_per_alloc') or 0:.1f} | {inv if inv else r['investigate']['status']} "
            f"| {r['investigate'].get('rss_mb', '-')} | {scan} "
            f"| {_ratio(inv, r['scan'])} | {npy if npy else r['numpy_peer']['status']} | {_ratio(inv, npy)} "
            f"| {loop if loop else r['loop_peer']['status']} | {_ratio(inv, loop)} |"
        )
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    """Investigate's time against events, one line per concurrency (log-log)."""
    import math

    pts = [(r["events"], _t(r["investigate"]), r["concurrency"]) for r in rows if _t(r["investigate"])]
    if not pts:
        return
    w, h, m = 640, 360, 56
    xs = [math.log10(p[0]) for p in pts]
    ys = [math.log10(p[1]) for p in pts]
    x0, x1 = min(xs) - 0.1, max(xs) + 0.1
    y0, y1 = min(ys) - 0.1, max(ys) + 0.1

    def px(v: float) -> float:
        return m + (v - x0) / (x1 - x0) * (w - 2 * m)

    def py(v: float) -> float:
        return h - m - (v - y0) / (y1 - y0) * (h - 2 * m)

    colors = ["#b3261e", "#1a4f8b", "#1e6b34", "#8a6100"]
    el = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">',
        f'<line x1="{m}" y1="{h - m}" x2="{w - m}" y2="{h - m}" stroke="#555"/>',
        f'<line x1="{m}" y1="{m}" x2="{m}" y2="{h - m}" stroke="#555"/>',
        f'<text x="{w / 2}" y="{h - 16}" text-anchor="middle">page events (log scale)</text>',
        f'<text x="14" y="{h / 2}" transform="rotate(-90 14 {h / 2})" text-anchor="middle">'
        "investigate, whole process, s (log scale)</text>",
    ]
    for i, conc in enumerate(sorted({p[2] for p in pts})):
        line = sorted((p[0], p[1]) for p in pts if p[2] == conc)
        c = colors[i % len(colors)]
        coords = " ".join(f"{px(math.log10(e)):.1f},{py(math.log10(t)):.1f}" for e, t in line)
        el.append(f'<polyline points="{coords}" fill="none" stroke="{c}" stroke-width="2"/>')
        for e, t in line:
            el.append(f'<circle cx="{px(math.log10(e)):.1f}" cy="{py(math.log10(t)):.1f}" r="3" fill="{c}"/>')
            x, y = px(math.log10(e)), py(math.log10(t))
            el.append(f'<text x="{x + 5:.1f}" y="{y - 5:.1f}">{fmt_size(e)}: {t:.0f} s</text>')
        el.append(f'<text x="{w - m - 120}" y="{m + 14 * i}" fill="{c}">{conc} rooms in flight</text>')
    el.append("</svg>")
    path.write_text("\n".join(el) + "\n")


def render(rows: list[dict], readme: Path) -> None:
    mach = machine()
    body = [
        BEGIN,
        "",
        "## Realistic shapes (issue #23)",
        "",
        f"Machine: {mach['nproc']} cores, {mach['memory']}; Python {mach['python']}, DuckDB {mach['duckdb']}.",
        "Bundles from `forensics simulate OUT --scale --page-events realistic --events N --concurrency C` "
        "(3 prefill + 4 decode nodes, one without page telemetry, page size 32). Whole processes, one run each; "
        "R = investigate / scan.",
        "",
        table(rows),
        "",
        "Doublings (investigate):",
        "",
        *[f"- {d}" for d in doublings(rows)],
        "",
        "![time vs events, realistic shapes](shapes.svg)",
        "",
        END,
    ]
    text = readme.read_text()
    if BEGIN in text:
        text = text[: text.index(BEGIN)] + "\n".join(body) + text[text.index(END) + len(END) :]
    else:
        text = text.rstrip("\n") + "\n\n" + "\n".join(body) + "\n"
    readme.write_text(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grid", default="2M@300,4M@300,2M@600", help="events@concurrency, comma-separated")
    ap.add_argument("--work", type=Path, default=Path("/tmp/kvf-bench"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--peer-max", type=parse_size, default=parse_size("10M"), help="largest size the peers run at")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--results", type=Path, default=HERE / "shapes.json")
    ap.add_argument("--readme", type=Path, default=HERE / "README.md")
    ap.add_argument("--render-only", action="store_true", help="rebuild the table and plot from --results")
    a = ap.parse_args(argv)
    a.work.mkdir(parents=True, exist_ok=True)
    stored = json.loads(a.results.read_text()) if a.results.is_file() else {"rows": []}

    def log(msg: str) -> None:
        print(msg, flush=True)

    for events, conc in [] if a.render_only else grid(a.grid):
        log(f"{fmt_size(events)} events at {conc} rooms in flight")
        row = run_one(events, conc, a, log)
        stored["rows"] = [r for r in stored["rows"] if (r["events"], r["concurrency"]) != (row["events"], conc)]
        stored["rows"].append(row)
        a.results.write_text(json.dumps(stored, indent=1) + "\n")
    render(stored["rows"], a.readme)
    plot(stored["rows"], HERE / "shapes.svg")
    log(f"wrote {a.readme}, {HERE / 'shapes.svg'}, {a.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
