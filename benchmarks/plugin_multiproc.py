"""The plugin in a production-shaped cluster (issue #48, "Must show: the table"): 2 prefill and 2 decode
nodes, one OS process each, SGLang's own classes on CPU torch, the plugin switched on by KVF_SGLANG_*
and load_plugins() (tests/support/sglang_cluster). Prints, per release x page size x release timing x
guard mode and seed: truly affected responses, missed, false confirmed, false pairs,
indeterminate-but-clean (forensics investigate on the plugin's page files), guard misses, guard false
alarms, enforce refusals of clean requests, leaking responses delivered.

Results, before and after the harness went through the guard's protocol points: benchmarks/README.md.

Run it in an SGLang test venv (scripts/sglang_test_venv.sh; make test-sglang links .venv-sglang, 0.5.11,
and .venv-sglang-0.5.23), this checkout on the path:
    PYTHONPATH=. .venv-sglang-0.5.23/bin/python benchmarks/plugin_multiproc.py --seeds 101 \
        --requests 300 [--page-sizes 1,16] [--releases immediate,deferred] [--guards observe,enforce] \
        [--no-investigate]
The release column is the venv's SGLang (one release per invocation: run it in each venv). A cell the
release cannot run (0.5.11: page size 16, deferred release) is a row saying why. Use seeds no test
uses (the tests use 7 and 8). The four node processes start once (about a minute on 2 cores: each
imports SGLang) and run every cell; a cell then costs its drive and investigate.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import tempfile
from pathlib import Path

from tests.support.sglang_cluster.driver import Cluster, Setup, refusal, run
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
    cluster: Cluster | None = None
    with tempfile.TemporaryDirectory(prefix="kvf-mp-") as base:
        try:
            for ps in [int(x) for x in a.page_sizes.split(",")]:
                for release in a.releases.split(","):
                    for guard in a.guards.split(","):
                        for seed in [int(x) for x in a.seeds.split(",")]:
                            s = Setup(seed=seed, requests=a.requests, page_size=ps, release=release, guard=guard)
                            why = refusal(s)
                            if why is not None:
                                print(f"| {rel} | {ps} | {release} | {guard} | {seed} | not run: {why} |", flush=True)
                                continue
                            cluster = cluster or Cluster(s, Path(base) / "boot")
                            out = Path(base) / f"ps{ps}-{release}-{guard}-{seed}"
                            row = score(run(out, s, cluster), out, guard, analyse=not a.no_investigate)
                            shutil.rmtree(out)
                            cells = " | ".join(str(row[c]) if row[c] >= 0 else "-" for c in COLUMNS)
                            print(f"| {rel} | {ps} | {release} | {guard} | {seed} | {cells} |", flush=True)
        finally:
            if cluster is not None:
                cluster.shutdown()


if __name__ == "__main__":
    main()
