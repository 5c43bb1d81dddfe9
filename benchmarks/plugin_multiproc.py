"""The plugin in a production-shaped cluster (issue #48, "Must show: the table"): 2 prefill and 2 decode
nodes, one OS process each, SGLang's own classes on CPU torch, the plugin switched on by KVF_SGLANG_*
and load_plugins() (tests/support/sglang_cluster). Prints, per release x page size x release timing x
guard mode and seed: truly affected responses, missed, false confirmed, false pairs,
indeterminate-but-clean (forensics investigate on the plugin's page files), guard misses, guard false
alarms, enforce refusals of clean requests, leaking responses delivered.

Run it in an SGLang test venv (scripts/sglang_test_venv.sh), this checkout first on the path:
    PYTHONPATH=. /work/venvs/sgl-0.5.23/bin/python benchmarks/plugin_multiproc.py --seeds 101 \
        --requests 300 [--page-sizes 1,16] [--releases immediate,deferred] [--guards observe,enforce] \
        [--no-investigate]
The release is the venv's (one release per invocation). Use seeds no test uses (the tests use 7 and 8).
Each cell costs about 1.5 min on 2 cores (the four processes import SGLang; investigate compiles).
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path

from tests.support.sglang_cluster.driver import Setup, run
from tests.support.sglang_cluster.score import COLUMNS, score


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="101")
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--page-sizes", default="1,16")
    ap.add_argument("--releases", default="immediate,deferred")
    ap.add_argument("--guards", default="observe,enforce")
    ap.add_argument("--no-investigate", action="store_true")
    a = ap.parse_args()
    logging.disable(logging.WARNING)
    import importlib.metadata

    rel = importlib.metadata.version("sglang")
    print("| release | page | release timing | guard | seed | " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * (5 + len(COLUMNS)))
    for ps in [int(x) for x in a.page_sizes.split(",")]:
        for release in a.releases.split(","):
            for guard in a.guards.split(","):
                for seed in [int(x) for x in a.seeds.split(",")]:
                    with tempfile.TemporaryDirectory(prefix="kvf-mp-") as tmp:
                        s = Setup(seed=seed, requests=a.requests, page_size=ps, release=release, guard=guard)
                        res = run(Path(tmp), s)
                        row = score(res, Path(tmp), guard, analyse=not a.no_investigate)
                    cells = " | ".join(str(row[c]) if row[c] >= 0 else "-" for c in COLUMNS)
                    print(f"| {rel} | {ps} | {release} | {guard} | {seed} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
