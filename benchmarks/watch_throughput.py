"""How fast `forensics watch` reads, on one core, and how much memory it holds (issue #26).

Simulates a cluster (forensics simulate), optionally interleaves each node's log with the batch lines a
busy SGLang server writes between request lines (`Decode batch, #running-req: ...`, as SGLang 0.5.11's
scheduler prints it: the simulator's writer, forensics/simulate/batch_lines.py; real servers log one every
decode_log_interval steps), then runs
`forensics watch DIR --once` as its own process pinned to one core (taskset) and reports lines per
second of the whole process and its peak RSS.

  .venv/bin/python benchmarks/watch_throughput.py --requests 20000 --batch-lines 0 4
  .venv/bin/python benchmarks/watch_throughput.py --requests 14400 --hours 1   # memory after 1 h of traffic
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from forensics.simulate import build_config, simulate  # noqa: E402
from forensics.simulate.batch_lines import decode_line  # noqa: E402

RELEASE = "0.5.11"  # the batch lines as this release prints them (the simulator's writer of them)


def interleave(bundle: Path, per_line: int) -> None:
    """Each text log line followed by `per_line` batch lines stamped with its own prefix."""
    for log in sorted((bundle / "engine").glob("*/server.log")):
        out = []
        for i, line in enumerate(log.read_text().splitlines(keepends=True)):
            out.append(line)
            prefix = line.split("] ", 1)[0] + "] " if line.startswith("[") else ""
            for k in range(per_line):
                u = (i + k) % 100 / 100
                out.append(
                    prefix + decode_line(RELEASE, 0, 3 + k, 2600 + i % 997, u, 0.0, 0, 0, 0, 30 + i % 50 + u) + "\n"
                )
        log.write_text("".join(out))


def measure(bundle: Path, work: Path) -> dict[str, float]:
    cmd = ["/usr/bin/time", "-f", "maxrss_kb=%M"] if Path("/usr/bin/time").exists() else []
    cmd += ["taskset", "-c", "0"] if shutil.which("taskset") else []
    cmd += [sys.executable, "-m", "forensics", "watch", str(bundle), "--once", "--alerts", str(work / "alerts.jsonl")]
    (work / "alerts.jsonl").unlink(missing_ok=True)
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT)
    wall = time.perf_counter() - t
    summary = done.stderr.rsplit("watch: ", 1)[1].split()
    lines, rooms = int(summary[0]), int(summary[5])
    rss = next((int(x.split("=")[1]) / 1024 for x in done.stderr.split() if x.startswith("maxrss_kb=")), float("nan"))
    alerts = sum(1 for _ in (work / "alerts.jsonl").open())
    return {"lines": lines, "seconds": round(wall, 2), "lines_per_s": round(lines / wall), "alerts": alerts,
            "rooms_open_at_end": rooms, "peak_rss_mb": round(rss)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--hours", type=float, default=None, help="spread the requests over this much log time")
    ap.add_argument("--batch-lines", type=int, nargs="+", default=[0, 4], help="batch lines after each log line")
    ap.add_argument("--work", type=Path, default=Path("/tmp/kvf-watch-bench"))
    a = ap.parse_args()
    results = []
    for per in a.batch_lines:
        work = a.work / f"b{per}"
        shutil.rmtree(work, ignore_errors=True)
        kw = {"duration_us": int(a.hours * 3600e6)} if a.hours else {}
        simulate(work / "sim", build_config("default", seed=3, requests=a.requests, **kw))
        bundle = work / "sim" / "bundle"
        if per:
            interleave(bundle, per)
        r = {"requests": a.requests, "batch_lines_per_line": per, **measure(bundle, work)}
        results.append(r)
        print(json.dumps(r))
    (a.work / "results.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
