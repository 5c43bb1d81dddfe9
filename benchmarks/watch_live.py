"""Detection latency of `forensics watch`, two processes (issue #26): `forensics simulate --live`
writes a cluster's logs over real time, the watcher follows them; for each placeholder alert, the time
from the write of its deciding line (the decode Req Time Stats line, in the replay's truth record) to
the alert's detected_at. Prints median and maximum.

  .venv/bin/python benchmarks/watch_live.py --requests 2000 --speed 60
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--speed", type=float, default=60.0)
    ap.add_argument("--interval", type=float, default=0.2)
    ap.add_argument("--work", type=Path, default=Path("/tmp/kvf-watch-live"))
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    target, truth, alerts = a.work / "live", a.work / "live_truth.jsonl", a.work / "alerts.jsonl"
    target.mkdir(parents=True)
    py = [sys.executable, "-m", "forensics"]
    writer = subprocess.Popen([*py, "simulate", str(a.work / "sim"), "--seed", "12", "--requests", str(a.requests),
                               "--abort-rate", "0.05", "--live", str(target), "--speed", str(a.speed),
                               "--rotate-every", "2000", "--live-truth", str(truth)])  # fmt: skip
    while not (target / "bundle.toml").exists():
        time.sleep(0.05)
    watcher = subprocess.Popen([*py, "watch", str(target), "--alerts", str(alerts), "--interval", str(a.interval),
                                "--idle-exit", "5"])  # fmt: skip
    writer.wait()
    watcher.wait()
    written = {}
    lines = 0
    for line in truth.read_text().splitlines():
        rec = json.loads(line)
        lines += 1
        if rec["kind"] == "decode_stats":
            written[rec["room"]] = rec["written_at"]
    got = [json.loads(x) for x in alerts.read_text().splitlines()]
    lat = sorted(
        datetime.fromisoformat(x["detected_at"].replace("Z", "+00:00")).timestamp() - written[x["room"]]
        for x in got
        if x["kind"] == "placeholder_signature" and x["room"] in written
    )
    print(json.dumps({"requests": a.requests, "speed": a.speed, "interval_s": a.interval, "alerts": len(got),
                      "placeholder_alerts_timed": len(lat), "latency_median_s": round(statistics.median(lat), 3),
                      "latency_max_s": round(max(lat), 3)}))  # fmt: skip


if __name__ == "__main__":
    main()
