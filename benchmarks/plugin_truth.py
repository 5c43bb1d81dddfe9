"""The truth comparison of the SGLang plugin (issue #38) on seeds no test uses: for each seed the
simulator's request mix is driven through SGLang's real allocator with the plugin's hooks
(tests/support/sglang_drive.py), investigate runs on the plugin's page events and is compared with the
simulator's truth (tests/support/truthcheck.py), and the guard's flags (observe) and errored requests
(enforce) with the truly exposed responses. --page-size 16 drives 0.5.23's paged allocator (its venv:
make test-sglang builds .venv-sglang-0.5.23).

    PYTHONPATH=$PWD .venv-sglang/bin/python benchmarks/plugin_truth.py 300 101 102 103
    PYTHONPATH=$PWD .venv-sglang-0.5.23/bin/python benchmarks/plugin_truth.py 300 101 102 103 --page-size 16
"""

from __future__ import annotations

import argparse
import csv
import logging
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from forensics.simulate.config import build_config  # noqa: E402
from tests.support import sglang_drive as drive  # noqa: E402
from tests.support.analysis import Findings  # noqa: E402
from tests.support.truthcheck import compare  # noqa: E402

logging.getLogger("forensics.sglang").setLevel(logging.CRITICAL)
ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("requests", type=int)
ap.add_argument("seeds", type=int, nargs="+")
ap.add_argument("--page-size", type=int, default=1)
a = ap.parse_args()
n, ps = a.requests, a.page_size
for seed in a.seeds:
    row = {}
    for guard in ("observe", "enforce"):
        out = Path(tempfile.gettempdir()) / f"kvf-plugin-truth-{seed}-{guard}-{ps}"
        cfg = build_config("default", seed=seed, requests=n, page_size=ps, long_rate=0.08, abort_rate=0.05)
        r = drive.run(out, cfg, guard=guard)
        truth = {int(x["room"]) for x in csv.DictReader(open(out / "truth/responses.csv")) if x["exposed"] == "1"}
        got = r["flagged_rooms"] if guard == "observe" else r["errored_rooms"]
        row[guard] = (len(truth - got), len(got - truth))
        if guard == "observe":
            c = compare(out)
            f = Findings(out / "bundle")
            aff = {x[0] for x in f.rows("SELECT request_id FROM affected_responses")}
            tr = {x["request_id"] for x in csv.DictReader(open(out / "truth/responses.csv")) if x["exposed"] == "1"}
            row["inv"] = dict(
                truth_exposed=len(tr),
                affected=len(aff),
                missed=len(c.missed),
                false=len(c.false_confirmed),
                bad_ind=len(c.bad_indeterminate),
                pairs=f"{c.found_pairs}/{c.truth_pairs}",
                prec=c.pair_precision,
                rec=c.pair_recall,
                slot_mm=len(c.slot_mismatches),
                summary={k: r["summary"][k] for k in ("placeholders", "aborts", "exposed_responses", "exposure_pairs")},
            )
    print(seed, row, flush=True)
