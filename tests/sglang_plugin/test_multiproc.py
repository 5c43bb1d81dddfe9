"""The plugin as production runs it (issue #48): 2 prefill and 2 decode nodes, one OS process each,
SGLang's own allocator, DecodeReqToTokenPool, DecodePreallocQueue._pre_alloc, Scheduler.run_batch and
Mooncake manager, the plugin switched on by KVF_SGLANG_* and load_plugins() (tests/support/
sglang_cluster, whose docstrings say what is a stub). Truth is the driver's own record of what each
decode forward pass read. A run per page size, in observe mode, with placeholders and in-flight aborts.

The plugin's properties that today's code does not hold are xfail(strict=True) with the figure
measured (benchmarks/plugin_multiproc.py prints the full table); the fixes of #48 remove them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.sglang_plugin.conftest import need_sglang

need_sglang()

RUNS = {1: 7, 16: 8}  # page size -> seed
REQUESTS = 120


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: Any) -> Any:
    """The four node processes, started once for the module's runs (each run resets them)."""
    from tests.support.sglang_cluster.driver import Cluster, Setup

    c = Cluster(Setup(seed=0), tmp_path_factory.mktemp("cluster-boot"))
    yield c
    c.shutdown()


@pytest.fixture(scope="module", params=sorted(RUNS), ids=lambda ps: f"ps{ps}")
def run(request: Any, tmp_path_factory: Any) -> dict[str, Any]:
    from tests.support.sglang_cluster.driver import Setup, refusal
    from tests.support.sglang_cluster.driver import run as drive
    from tests.support.sglang_cluster.score import score

    ps = request.param
    setup = Setup(seed=RUNS[ps], requests=REQUESTS, page_size=ps, release="immediate", guard="observe")
    why = refusal(setup)
    if why is not None:
        pytest.skip(why)
    out = tmp_path_factory.mktemp(f"cluster-ps{ps}")
    res = drive(out, setup, request.getfixturevalue("cluster"))
    res["row"] = score(res, out, "observe")  # the module's one investigate of this run
    res["out"], res["ps"] = out, ps
    return res


def test_the_harness_runs_a_node_per_process_with_affected_and_clean_responses(run: dict[str, Any]) -> None:
    pids = run["pids"]
    assert len(set(pids.values())) == 4 and os.getpid() not in pids.values()
    for name, closed in run["closed"].items():
        assert closed["pid"] == pids[name]
        assert closed["files"] and all(Path(f).stat().st_size > 0 for f in closed["files"]), name
        assert any(p.endswith("Scheduler.run_batch") for p in closed["applied"])
        assert any(p.endswith("DecodePreallocQueue._pre_alloc") for p in closed["applied"])
    decoded = [r for r in run["reqs"] if r.decoded]
    assert any(r.sources for r in decoded) and any(not r.sources for r in decoded)
    assert any(r.status == 499 for r in run["reqs"]) and any(r.placeholder for r in run["reqs"])


def test_investigate_confirms_no_clean_response(run: dict[str, Any]) -> None:
    assert run["row"]["false_confirmed"] == 0


FALSE_PAIRS = "#48: confirmed pairs name a source the recipient never read (2 at ps1 seed 7; 4-12 at seed 101)"


@pytest.mark.xfail(strict=True, reason=FALSE_PAIRS)
def test_investigate_names_no_false_source(run: dict[str, Any]) -> None:
    assert run["row"]["false_pairs"] == 0


def test_investigate_misses_no_affected_response(run: dict[str, Any], request: Any) -> None:
    if run["ps"] == 16:
        request.applymarker(pytest.mark.xfail(strict=True, reason="#48: at page size 16 investigate misses "
                                              "affected responses (6 of 27: seed 101, 300 requests)"))  # fmt: skip
    assert run["row"]["missed"] == 0


FALSE_ALARMS = "#48: the guard alarms on clean requests (155-213 per run of 300 requests, seed 101)"


@pytest.mark.xfail(strict=True, reason=FALSE_ALARMS)
def test_the_guard_raises_no_false_alarm(run: dict[str, Any]) -> None:
    assert run["row"]["guard_false_alarms"] == 0


@pytest.mark.xfail(strict=True, reason="#48: the guard does not flag every leaking response (seeds 7 and 8)")
def test_the_guard_flags_every_leaking_response(run: dict[str, Any]) -> None:
    assert run["row"]["guard_misses"] == 0
