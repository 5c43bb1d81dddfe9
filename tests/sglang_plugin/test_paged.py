"""SGLang 0.5.23's paged allocator and its real ReqToTokenPool, page size 16, driven through the
simulator's request mix with the placeholder path and aborts: investigate on the page events gives
the simulator's truth, and the guard flags exactly the truly exposed responses, in observe and in
enforce. On a CPU platform 0.5.23's PagedTokenToKVPoolAllocator runs its torch-native alloc_extend /
alloc_decode (use_triton_kernels is the platform's supports_triton, false there), and it frees a
request's pages through free_segment -> free_page_ids, never free(): the hook on free_page_ids is
what puts those frees in the files (without it the same run confirms dozens of false exposures).
0.5.11's paged allocator runs only its Triton kernel, which does not run on CPU: skipped there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.sglang_plugin.conftest import REQUIRED, exposed_rooms, need_sglang, simulate_driven, truth_rows

need_sglang()


def _paged_on_cpu() -> tuple[bool, str]:
    from forensics.sglang.cpu import import_sglang

    sg = import_sglang()
    cls = sg.A.PagedTokenToKVPoolAllocator
    if "use_triton_kernels" not in cls.__init__.__code__.co_names:
        return False, f"SGLang {sg.sglang.__version__}'s paged allocator has no torch-native path (Triton only)"
    if not sg.rows.__module__.startswith("sglang"):
        # scripts/sglang_test_venv.sh installs what 0.5.23's memory_pool imports: under make test-sglang
        # the real class must be there
        assert not REQUIRED, f"SGLang {sg.sglang.__version__}'s ReqToTokenPool does not import here"
        return False, "SGLang's ReqToTokenPool does not import here"
    return True, ""


ok, why = _paged_on_cpu()
if not ok:
    pytest.skip(why, allow_module_level=True)

SEED, PAGE = 23, 16


@pytest.fixture(scope="module")
def observe(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("paged-observe")
    return out, simulate_driven(out, seed=SEED, page_size=PAGE, guard="observe")


def test_the_paged_allocators_events_give_the_truth(observe: tuple[Path, dict[str, Any]]) -> None:
    from forensics.sglang import targets
    from tests.support.analysis import Findings
    from tests.support.truthcheck import compare

    out, r = observe
    assert any(p.endswith("PagedTokenToKVPoolAllocator.free_page_ids") for p in targets.APPLIED)
    assert any(p.endswith("memory_pool.ReqToTokenPool.write") for p in targets.APPLIED)
    summary = r["summary"]
    assert summary["placeholders"] > 0 and summary["aborts"] > 0 and summary["exposed_responses"] > 0
    assert r["drops"] == dict.fromkeys(r["drops"], 0)
    f = Findings(out / "bundle")
    frees = f.rows("SELECT count(*) FROM page_events WHERE op = 'free' AND node LIKE 'decode-%'")[0][0]
    assert frees > 0
    # whole pages: every alloc and free covers page-aligned runs of 16 slots
    assert f.rows(f"SELECT count(*) FROM page_events WHERE op IN ('alloc', 'free') AND (start % {PAGE} <> 0 "
                  f"OR \"end\" % {PAGE} <> 0)")[0][0] == 0  # fmt: skip
    truth = {x["request_id"] for x in truth_rows(out, "responses.csv") if x["exposed"] == "1"}
    affected = dict(f.rows("SELECT request_id, status FROM affected_responses"))
    assert truth and set(affected) == truth and set(affected.values()) == {"confirmed"}
    c = compare(out)
    assert (c.missed, c.false_confirmed, c.bad_indeterminate, c.slot_mismatches) == ([], [], [], [])
    assert c.found_pairs == c.truth_pairs > 0


def test_the_guard_flags_exactly_the_exposed_responses_on_pages(
    observe: tuple[Path, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    out, r = observe
    truth = exposed_rooms(out)
    assert truth and r["flagged_rooms"] == truth and r["errored_rooms"] == set()
    out2 = tmp_path_factory.mktemp("paged-enforce")
    r2 = simulate_driven(out2, seed=SEED, page_size=PAGE, guard="enforce")
    assert exposed_rooms(out2) == truth and r2["errored_rooms"] == truth == r2["flagged_rooms"]
