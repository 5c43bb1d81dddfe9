"""The plugin as production runs it (issue #48): 2 prefill and 2 decode nodes, one OS process each,
SGLang's own allocator, DecodeReqToTokenPool, DecodePreallocQueue._pre_alloc, Scheduler.run_batch and
Mooncake manager, the plugin switched on by KVF_SGLANG_* and load_plugins() (tests/support/
sglang_cluster, whose docstrings say what is a stub). Truth is the driver's own record of what each
decode forward pass read. A run per page size, in observe mode, with placeholders and in-flight aborts.

Runs on each release's venv (make test-sglang): 0.5.23 at page sizes 1 and 16, 0.5.11 at page size 1
(its paged allocator runs only a Triton kernel: skipped with that reason). The four node processes
start once per module (spawn, as SGLang starts its schedulers; each imports SGLang, which costs most
of the module's time) and serve every run; each observe run is investigated once.

Enforce runs (immediate release at page sizes 1 and 16, deferred at 16; the guard's figures only, no
investigate) hold that no leaking response is delivered and count the clean requests refused.

The plugin's properties that today's code does not hold are xfail(strict=True) per release and page
size, with the figure measured (MEASURED, ENFORCE_MEASURED; benchmarks/plugin_multiproc.py prints the
full table)."""

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


# what the plugin still fails, as measured on this module's runs (seed 7 at page size 1, seed 8 at 16,
# 120 requests, immediate release, observe; the harness through the guard's protocol points, 0.5.11's
# own decode thread, SGLang's own deferred release):
# (release, page size, column) -> the figure
MEASURED = {
    ("0.5.23", 1, "guard_false_alarms"): "the guard alarms on 2 clean requests, both in_flight",
    ("0.5.23", 16, "guard_false_alarms"): "the guard alarms on 9 clean requests, all in_flight (each given a page "
    "while an aborted room's transfer was unconcluded: immediate release orders nothing between its late chunk "
    "and their writes, so the guard fails closed)",
    ("0.5.11", 1, "guard_false_alarms"): "the guard alarms on 2 clean requests, both in_flight (as on 0.5.23)",
    ("0.5.23", 16, "indeterminate_clean"): "investigate leaves 9 clean responses indeterminate, each a reader "
    "that took an aborted room's page before the prefill concluded the room (its late chunk may have landed "
    "after the reader's own KV)",
}


def _none(run: dict[str, Any], request: Any, column: str) -> None:
    import importlib.metadata

    why = MEASURED.get((importlib.metadata.version("sglang"), run["ps"], column))
    if why is not None:
        request.applymarker(pytest.mark.xfail(strict=True, reason=f"#48: {why}"))
    assert run["row"][column] == 0


def test_investigate_confirms_no_clean_response(run: dict[str, Any], request: Any) -> None:
    _none(run, request, "false_confirmed")


def test_investigate_names_no_false_source(run: dict[str, Any], request: Any) -> None:
    _none(run, request, "false_pairs")


def test_investigate_misses_no_affected_response(run: dict[str, Any], request: Any) -> None:
    _none(run, request, "missed")


def test_investigate_leaves_no_clean_response_indeterminate(run: dict[str, Any], request: Any) -> None:
    """An aborted room's failed send is bounded by the prefill's conclusion of the room (src concluded):
    a reader that took its slots after that, proven by the clock bounds, and read its own KV there is
    clean; one that took them inside the window stays indeterminate."""
    _none(run, request, "indeterminate_clean")


def test_the_guard_raises_no_false_alarm(run: dict[str, Any], request: Any) -> None:
    _none(run, request, "guard_false_alarms")


def test_the_guard_flags_every_leaking_response(run: dict[str, Any], request: Any) -> None:
    _none(run, request, "guard_misses")


ENFORCE = {"imm-ps1": ("immediate", 1, 7), "imm-ps16": ("immediate", 16, 8), "def-ps16": ("deferred", 16, 8)}
# (release, case) -> the clean requests enforce refused, as measured
ENFORCE_MEASURED: dict[tuple[str, str], str] = {
    ("0.5.23", "imm-ps16"): "enforce refuses 4 clean requests (in_flight: pages of aborted rooms released at once)",
    ("0.5.23", "def-ps16"): "enforce refuses 1 clean request (in_flight: SGLang's deferred release timed out, 3 "
    "ticks, before the aborted room's transfer drained: released without the drain ack)",
}


@pytest.fixture(scope="module", params=sorted(ENFORCE))
def enforced(request: Any, tmp_path_factory: Any) -> dict[str, Any]:
    from tests.support.sglang_cluster.driver import Setup, refusal
    from tests.support.sglang_cluster.driver import run as drive
    from tests.support.sglang_cluster.score import score

    release, ps, seed = ENFORCE[request.param]
    setup = Setup(seed=seed, requests=REQUESTS, page_size=ps, release=release, guard="enforce")
    why = refusal(setup)
    if why is not None:
        pytest.skip(why)
    out = tmp_path_factory.mktemp(f"cluster-{request.param}")
    res = drive(out, setup, request.getfixturevalue("cluster"))
    res["row"] = score(res, out, "enforce", analyse=False)
    res["case"] = request.param
    return res


def test_enforce_delivers_no_leaking_response(enforced: dict[str, Any]) -> None:
    assert enforced["row"]["leaks_delivered"] == 0
    assert enforced["row"]["guard_misses"] == 0


def test_enforce_refuses_no_clean_request(enforced: dict[str, Any], request: Any) -> None:
    import importlib.metadata

    why = ENFORCE_MEASURED.get((importlib.metadata.version("sglang"), enforced["case"]))
    if why is not None:
        request.applymarker(pytest.mark.xfail(strict=True, reason=f"#48: {why}"))
    assert enforced["row"]["enforce_refused_clean"] == 0
