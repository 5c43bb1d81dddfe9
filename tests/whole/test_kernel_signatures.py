"""Each numba kernel compiles one signature across the representative investigations
(tests/support/kernel_signatures.py: the sample, a decode node without page telemetry, page events lost
and out of order): the call sites hand every kernel one array type (forensics.ownership.kernels.frozen)
and no literal ints, so a clean clone and a user's first run of a kind compile each kernel once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support import ROOT


def test_each_kernel_compiles_once(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "tests.support.kernel_signatures", str(tmp_path)]
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-4000:]
    sigs = json.loads((tmp_path / "signatures.json").read_text())
    for reached in ("runmap.screen_chunk", "sweep.hits", "allocator.walk", "transfer_links.match_events"):
        assert sigs[f"forensics.ownership.kernels.{reached}"], f"the runs never reached {reached}"
    several = {name: s for name, s in sigs.items() if len(s) > 1}
    assert not several, f"kernels compiled for more than one type: {json.dumps(several, indent=1)}"
