"""Issue #47, words a privacy officer can sign: on a logs-only simulated incident (no page events at all,
so much is indeterminate), the notices, the brief and the report say "were" only of what is confirmed and
"may have been" of the rest, checked against the simulator's truth; the window starts at the first
response that may be affected; the bound is put in context; a client-settable cohort rule is warned of
on the command line and in the report."""

from __future__ import annotations

import csv
import re
import shutil
from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from forensics.outputs import fmt_ts
from forensics.pipeline import InvestigationResult, investigate, preview_cohorts
from forensics.report.notices import notice_stems
from forensics.simulate import build_config, simulate

# a notice, brief or report line that states as fact that a response was computed over others' data
STATED = re.compile(r"you received (?:was|were) computed")
LANDED = "landed in memory another request was using"


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def logs_only(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, InvestigationResult]:
    """A simulated incident with its page files removed: every response rests on the engine logs alone."""
    tmp = tmp_path_factory.mktemp("words")
    simulate(tmp / "sim", build_config("default", seed=1, requests=500, no_telemetry="decode-0"))
    shutil.rmtree(tmp / "sim" / "bundle" / "pages")
    result = investigate(tmp / "sim" / "bundle", tmp / "out")
    return tmp / "out", tmp / "sim" / "truth", result


def test_no_notice_states_what_is_not_confirmed(logs_only) -> None:
    out, truth, _ = logs_only
    exposed = {r["request_id"] for r in _csv(truth / "responses.csv") if r["exposed"] == "1"}
    notifications = [n for n in _csv(out / "notifications.csv") if int(n["responses_received"])]
    stems = notice_stems(n["account_id"] for n in notifications)
    undecided = [n for n in notifications if int(n["responses_received_confirmed"]) == 0]
    assert undecided, "the incident must have accounts with indeterminate responses only"
    for n in notifications:
        ids = n["received_request_ids"].split(";")
        for ext in ("txt", "html"):
            text = (out / "notices" / f"{stems[n['account_id']]}.{ext}").read_text()
            if int(n["responses_received_confirmed"]) == 0:
                assert not STATED.search(text), (n["account_id"], ext)
                assert "may have been computed" in text, (n["account_id"], ext)
            else:  # a confirmed response is told as fact, and the truth has it exposed
                assert STATED.search(text), (n["account_id"], ext)
                assert exposed & set(ids), n["account_id"]
            if int(n["responses_received_confirmed"]) < int(n["responses_received"]):
                assert "may have been" in text


def test_notice_gives_the_accounts_own_dates(logs_only) -> None:
    out, _, _ = logs_only
    requests = [r for r in _csv(out / "notices" / "requests.csv") if r["role"] == "received"]
    by_account: dict[str, list[str]] = {}
    for r in requests:
        by_account.setdefault(r["account_id"], []).append(r["first_at"])
    stems = notice_stems(by_account)
    for account, times in by_account.items():
        text = (out / "notices" / f"{stems[account]}.txt").read_text()
        first, last = min(times), max(times)
        dates = first if first == last else f"from {first} to {last}"
        assert f"Your dates: {dates}" in text, account


def test_mechanisms_split_confirmed_from_indeterminate(logs_only) -> None:
    out, truth, _ = logs_only
    affected = _csv(out / "affected_responses.csv")
    late = [a for a in affected if "foreign_write" in a["kinds"].split(";") and a["cohort"] == "customer"]
    late_sure = [a for a in late if a["status"] == "confirmed"]
    assert late and not late_sure, "logs only: late writes are indeterminate"
    # the truth has no late write at all in this incident: nothing may say one landed
    assert not any(r["kinds"] and "foreign_write" in r["kinds"] for r in _csv(truth / "responses.csv"))
    brief = (out / "brief.html").read_text()
    md = (out / "report.md").read_text()
    for text in (brief, md, (out / "report.html").read_text()):
        assert LANDED not in text.replace("may have landed in memory another request was using", "")
    assert f"Late writes ({len(late):,} customer responses: 0 confirmed, {len(late):,} indeterminate)" in brief
    assert f"**Late write ({len(late):,} customer responses: 0 confirmed, {len(late):,} indeterminate;" in md
    assert "no reliability could be measured" in brief and "no reliability could be measured" in md
    # section 3: what the engine logs prove, and what they leave open, apart
    sig = [a for a in affected if a["evidence"] == "signature"]
    sure = len({a["request_id"] for a in sig if a["status"] == "confirmed"})
    undecided = len({a["request_id"] for a in sig}) - sure
    assert "proven by the engine logs" not in (out / "report.html").read_text()
    proven = f"the engine logs prove that {sure:,} of them attended others' data, and the other {undecided:,} may have"
    assert proven in md


def test_window_starts_at_the_first_response_that_may_be_affected(logs_only) -> None:
    out, truth, _ = logs_only
    con = duckdb.connect(str(out / "incident.duckdb"), read_only=True)
    try:
        times = dict(
            con.execute("""SELECT a.request_id, t.affected_at FROM internal.affected_responses a
                JOIN internal.affected_times t USING (request_id) WHERE a.cohort = 'customer'""").fetchall()
        )
        status = dict(con.execute("SELECT request_id, status FROM internal.affected_responses").fetchall())
    finally:
        con.close()
    md = (out / "report.md").read_text()
    m = re.search(r"- Customer responses that may be affected: (\S+) to (\S+?)(?:;|\n)", md)
    assert m
    assert m.group(1) == fmt_ts(min(times.values()))
    truly = {r["request_id"] for r in _csv(truth / "responses.csv") if r["exposed"] == "1"}
    exposed = [t for rid, t in times.items() if rid in truly]
    start = datetime.fromisoformat(m.group(1).replace("Z", "+00:00"))
    assert exposed and start <= min(exposed)  # never after the first truly exposed customer response
    confirmed = [t for rid, t in times.items() if status[rid] == "confirmed"]
    if confirmed and min(confirmed) != min(times.values()):
        assert f"the first confirmed: {fmt_ts(min(confirmed))}" in md
    notice = next((out / "notices").glob("*.txt")).read_text()
    assert f"Between {m.group(1)}" in notice


def test_bound_in_context_and_cohort_warning(logs_only) -> None:
    out, _, result = logs_only
    md = (out / "report.md").read_text()
    scope = re.search(r"\| Requests in the evidence \| [\d,]+ \| ([\d,]+) \|", md)
    assert scope
    bound = re.search(
        r"up to \*\*([\d,]+)\*\* \(([\d,]+) accounts(?:, and ([\d,]+) requests whose account is unknown)?", md
    )
    assert bound
    # the share is of the known accounts' requests: those of unknown account may be the same records' rooms
    known = int(bound.group(1).replace(",", "")) - int((bound.group(3) or "0").replace(",", ""))
    assert f"{known:,} of {scope.group(1)} customer requests of known accounts" in md
    # the warning preview_cohorts gives on the same bundle is on the command line and in part 1
    bundle = out.parent / "sim" / "bundle"
    warnings = [w["message"] for w in preview_cohorts(bundle)["warnings"]]
    assert warnings and result.cohort_warnings == warnings
    summary = result.summary()
    part1 = md.split("## Part 2.")[0]
    html = (out / "report.html").read_text()
    for w in warnings:
        assert f"Warning: {w}" in summary
        assert f"{w}." in part1.split("**Cohort warning")[1]
        assert "Cohort warning" in html
