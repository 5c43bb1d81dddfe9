"""Issue #50: one response counted twice. vLLM PD behind a gateway that logs no room or decode node
(LiteLLM's spend logs, which rename the request ids), a decode node without page events: a response the
page events confirm on an instrumented node is a row keyed by its room (no gateway record names it), and
its own gateway record is another row (indeterminate: the uninstrumented node may have served it). No
evidence joins the two, so the headline is a range, never one number stated as fact. Against the
simulator's truth (a seed no other test uses; the gateway's ids and the rooms read back through
truth/gateway_ids.csv and truth/responses.csv):
- the distinct true responses the rows stand for lie within the headline's bounds, and the upper bound
  counts some of them twice (the defect this range answers);
- every room's row whose response also has a gateway-record row is in response_overlap;
- every truly exposed response is listed (recall 1.0), and every confirmed row is truly exposed;
- the report's headline, the brief and the command's summary print the range and say why;
- benchmarks/vllm_pd_eval.py reads renamed ids back through truth (no renamed id a miss);
- behind the spec's gateway (records name rooms), a stale reference on a decode node without page events
  is its record's row, not a room's row beside it (seed 67: the recipients were empty before)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from benchmarks.vllm_pd_eval import score
from forensics.pipeline import InvestigationResult, investigate
from forensics.simulate import build_config
from forensics.simulate.run import simulate
from tests.support.analysis import Findings

NODE = "decode-1"


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, InvestigationResult]:
    out = tmp_path_factory.mktemp("overlap")
    cfg = build_config(
        seed=61, requests=300, engine="vllm", vllm_pd=True, no_telemetry=NODE, gateway_format="litellm_spendlogs"
    )
    simulate(out, cfg)
    return out, investigate(out / "bundle", out / "out", as_of="2026-09-10T12:00:00Z")


def _truth_of(out: Path) -> tuple[dict[str, dict[str, str]], dict[str, str], dict[str, str]]:
    """Truth's responses, the simulator's id of each id the gateway logged, and of each room."""
    resp = {t["request_id"]: t for t in _read(out / "truth" / "responses.csv")}
    renamed = {r["format_request_id"]: r["spec_request_id"] for r in _read(out / "truth" / "gateway_ids.csv")}
    rooms = {t["room"]: t["request_id"] for t in resp.values()}
    return resp, renamed, rooms


def _rows(out: Path) -> list[tuple[str, str, str]]:
    """Each affected row as (the simulator's request id, status, the row's own id)."""
    _, renamed, rooms = _truth_of(out)
    f = Findings(out / "bundle")
    rows = f.rows("SELECT request_id, room::VARCHAR, status FROM affected_responses")
    return [(renamed[r] if r in renamed else rooms.get(room or "", r), s, r) for r, room, s in rows]


def test_headline_bounds_hold_the_true_count(run: tuple[Path, InvestigationResult]) -> None:
    out, result = run
    rows = _rows(out)
    h = result.headline
    distinct = {t for t, _, _ in rows}
    assert h["affected"] == len({r for _, _, r in rows})
    assert h["affected"] - h["possible_overlap"] <= len(distinct) <= h["affected"]
    assert len(distinct) < h["affected"]  # the defect: some responses are two rows, the range is needed
    f = Findings(out / "bundle")
    overlap = {r for (r,) in f.rows("SELECT request_id FROM response_overlap")}
    twice = {t for t in distinct if sum(1 for u, _, _ in rows if u == t) > 1}
    assert twice
    # each such response's room row is named as one that may be another row's response
    assert {r for t, _, r in rows if t in twice and r.startswith("room:")} <= overlap


def test_recall_and_no_false_confirmation(run: tuple[Path, InvestigationResult]) -> None:
    out, _ = run
    resp, _, _ = _truth_of(out)
    exposed = {k for k, t in resp.items() if t["exposed"] == "1"}
    rows = _rows(out)
    assert exposed and exposed <= {t for t, _, _ in rows}
    assert {t for t, s, _ in rows if s == "confirmed"} <= exposed


def test_report_brief_and_summary_print_the_range(run: tuple[Path, InvestigationResult]) -> None:
    out, result = run
    h = result.headline
    lo, hi = h["customer"] - h["customer_possible_overlap"], h["customer"]
    assert h["customer_possible_overlap"] > 0
    words = f"{lo:,} to {hi:,}"
    md = (out / "out" / "report.md").read_text()
    assert f"**{words} responses**" in md and "A range, not one number" in md
    assert f"**{words}** (" in md
    html = (out / "out" / "report.html").read_text()
    assert f"<strong>{words} responses</strong>" in html and "A range, not one number" in html
    assert words in (out / "out" / "brief.html").read_text()
    assert f"customer cohort: {lo} to {hi} (" in result.summary()


def test_no_share_in_the_report_counts_more_than_its_whole(run: tuple[Path, InvestigationResult]) -> None:
    """The upper bound on exposed customer data beside the customer requests the gateway logged: rooms no
    record names may be the engine side of those same records, so a share counting them read "299 of 267
    customer requests, 112.0%". Every "X of Y ..." share the report prints is at most its whole."""
    import re

    out, _ = run
    md = (out / "out" / "report.md").read_text()
    shares = [
        (int(a.replace(",", "")), int(b.replace(",", "")))
        for a, b in re.findall(r"([\d,]+) of ([\d,]+) customer requests", md)
    ]
    assert shares
    assert all(part <= whole for part, whole in shares), shares
    # a range whose ends are equal is one number (the brief printed "32 to 32 requests whose account is unknown")
    brief = (out / "out" / "brief.html").read_text()
    assert not [m for m in re.findall(r"([\d,]+) to ([\d,]+)", brief) if m[0] == m[1]]


@pytest.fixture(scope="module")
def dark(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Findings]:
    """vLLM PD behind the spec's gateway (every record names its room and nodes), a decode node without page
    events: a stale reference the prefill's page events show lands on that node."""
    out = tmp_path_factory.mktemp("dark")
    simulate(out, build_config(seed=67, requests=300, engine="vllm", vllm_pd=True, no_telemetry=NODE))
    return out, Findings(out / "bundle")


def test_a_room_its_record_names_is_that_records_row(dark: tuple[Path, Findings]) -> None:
    """The receiver's room is known from the sender's transfer event (its peer) where the receiver has no
    page events: the exposure is the record's, one row with its account, never a room's row beside it."""
    out, f = dark
    truth = {t["request_id"]: t for t in _read(out / "truth" / "responses.csv")}
    on_dark = f.rows(f"SELECT recipient_request_id FROM exposures WHERE node = '{NODE}'")
    assert on_dark and all(r for (r,) in on_dark)  # each named by its record
    assert not f.rows("""SELECT a.request_id FROM affected_responses a JOIN gateway g
        ON g.bootstrap_room = a.room AND g.decode_node = a.decode_node WHERE a.request_id LIKE 'room:%'""")
    got = dict(f.rows("SELECT request_id, status FROM affected_responses"))
    exposed = {k for k, t in truth.items() if t["exposed"] == "1"}
    assert exposed <= set(got) and {k for k, s in got.items() if s == "confirmed"} <= exposed
    assert len(got) == f.rows("SELECT count(*) FROM affected_responses")[0][0]  # one row per response


def test_the_benchmark_scores_renamed_ids_through_truth(run: tuple[Path, InvestigationResult]) -> None:
    """benchmarks/vllm_pd_eval.py: LiteLLM renames every request, so no exposed id is logged as the
    simulator's; read back through truth, none is a miss, none a false confirmation, and the distinct
    responses lie within the headline's bounds."""
    out, _ = run
    resp, renamed, _ = _truth_of(out)
    logged = {r for (r,) in Findings(out / "bundle").rows("SELECT request_id FROM affected_responses")}
    exposed = {k for k, t in resp.items() if t["exposed"] == "1"}
    assert exposed and not exposed & logged and set(renamed.values()) >= exposed  # ids as logged: all missed
    r = score(out / "truth", out / "out")
    assert (r["missed"], r["affected_recall"], r["false_confirmed"], r["within_bounds"]) == (0, 1.0, 0, True)
