"""Issue #24, the disclosure for its three readers: a summary that fits its page budget, a notification
annex that matches notifications.csv, the mechanisms this run found (and only those) with their counts,
every disclosure field from bundle.toml or the findings, and the missing ones named."""

from __future__ import annotations

import csv
import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from forensics.errors import InputError
from forensics.pipeline import investigate
from forensics.report.jurisdictions import add_business_days
from forensics.simulate import build_config, simulate

PAGE_BUDGET = 5  # printed A4 pages for the disclosure summary (part 1)

FULL_DISCLOSURE = """
[remediation]
containment = "prefill pools resized to the context length on 2026-09-09"

[disclosure]
role = "processor"
awareness_basis = "a researcher's report, reproduced by the on-call engineer"
data_categories = ["prompt text", "possibly personal data in prompts"]
data_subjects = "unknown; at most the users of the affected accounts"
consequences = "other customers may have received fragments of prompts"
advice = "review stored responses of the listed requests"
probing_searched = "no probing pattern found in gateway logs"
hipaa = true
sec_8k = true
materiality_determined_at = 2026-09-11T16:00:00Z
eu_ai_act = true

[[disclosure.timeline]]
at = 2026-09-09T15:30:00Z
event = "Prefill pools resized"
source = "change ticket OPS-1234"
"""


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _annex(md: str) -> list[list[str]]:
    part = md[md.index("## Part 2. Notification annex") :]
    rows = [line for line in part.splitlines() if line.startswith("| ") and not line.startswith("| Account")]
    return [[c.strip() for c in re.split(r"(?<!\\)\|", r)[1:-1]] for r in rows]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("disclosure")
    out = {}
    for name, aborts in (("aborts", 0.05), ("no_aborts", 0.0)):
        # lifo: late transfers land in reused pages (the late-write mechanism the report must describe)
        simulate(tmp / name, build_config("default", seed=31, requests=350, abort_rate=aborts, allocator="lifo"))
        investigate(tmp / name / "bundle", tmp / name / "out")
        out[name] = tmp / name / "out"
    full = tmp / "full"
    shutil.copytree(tmp / "aborts" / "bundle", full)
    (full / "bundle.toml").write_text((full / "bundle.toml").read_text() + FULL_DISCLOSURE)
    investigate(full, tmp / "full_out", as_of="2026-09-10T09:00:00Z")
    out["full"] = tmp / "full_out"
    return out


def _count(cell: str) -> int:
    """The leading count of an annex cell ("—" is none; "up to 12 (3 likely)" is 12)."""
    m = re.match(r"(?:up to )?([\d,]+)", cell)
    return int(m.group(1).replace(",", "")) if m else 0


def test_notification_annex_matches_notifications_csv(runs: dict[str, Path], sample_out: Path) -> None:
    for out in (runs["aborts"], sample_out):
        rows = _annex((out / "report.md").read_text())
        got = {r[0]: (_count(r[1]), _count(r[2]), _count(r[3])) for r in rows}
        want = {
            n["account_id"]: (
                int(n["responses_received"]),
                int(n["requests_exposed"]),
                int(n["requests_possibly_exposed"]),
            )
            for n in _csv(out / "notifications.csv")
        }
        assert got == want and want
        # a cell that is not "—" is a role the account has, and "—" is none
        assert all((r[i] == "—") == (got[r[0]][i - 1] == 0) for r in rows for i in (1, 2, 3))


def test_nature_describes_only_the_mechanisms_found_with_their_counts(runs: dict[str, Path]) -> None:
    for name in ("aborts", "no_aborts"):
        md = (runs[name] / "report.md").read_text()
        affected = _csv(runs[name] / "affected_responses.csv")
        for label, kind in (("Stale read", "stale"), ("Late write", "foreign_write")):
            hit = [a for a in affected if kind in a["kinds"].split(";")]
            m = re.search(
                rf"\*\*{label} \(([\d,]+) customer responses(?:: ([\d,]+) confirmed, ([\d,]+) indeterminate)?; "
                r"([\d,]+) in all cohorts\)",
                md,
            )
            if hit:
                assert m, (name, label)
                assert int(m.group(4).replace(",", "")) == len(hit)
                customer = [a for a in hit if a["cohort"] == "customer"]
                assert int(m.group(1).replace(",", "")) == len(customer)
                # confirmed and indeterminate apart, said only when some are indeterminate
                undecided = sum(a["status"] != "confirmed" for a in customer)
                if undecided:
                    assert m.group(3) and int(m.group(3).replace(",", "")) == undecided
                    assert int(m.group(2).replace(",", "")) == len(customer) - undecided
                else:
                    assert m.group(2) is None
            else:
                assert m is None and label not in md.split("## 3.")[0], (name, label)
    assert "Late write" not in (runs["no_aborts"] / "report.md").read_text().split("## 3.")[0]
    assert "Late write (" in (runs["aborts"] / "report.md").read_text()


def test_missing_fields_are_named_and_supplied_ones_shown(runs: dict[str, Path]) -> None:
    bare = (runs["aborts"] / "report.md").read_text()
    m = re.search(r"\*\*Still missing \((\d+)\):\*\* (.*?)\. Supply", bare)
    assert m and int(m.group(1)) >= 8
    for key in ("role", "awareness_basis", "data_categories", "advice", "probing_searched", "\\[remediation\\]"):
        assert key in m.group(2), key
    full = (runs["full"] / "report.md").read_text()
    assert "Every disclosure field is filled in." in full and "**missing**" not in full
    assert "processor" in full and "prompt text; possibly personal data in prompts" in full


def test_deadlines_of_each_flagged_regime(runs: dict[str, Path]) -> None:
    md = (runs["full"] / "report.md").read_text()
    found = dict(re.findall(r"^- ([^:\n]+(?::[^:\n]+)?): (\d{4}-\d\d-\d\dT[\d:.]+Z)", md, flags=re.M))
    toml = (runs["full"].parent / "full" / "bundle.toml").read_text()
    discovered = re.search(r'discovered_at = "([^"]+)"', toml).group(1)
    d = datetime.fromisoformat(discovered.replace("Z", "+00:00"))
    want = {
        "GDPR Art. 33: supervisory authority": d.timestamp() + 72 * 3600,
        "HIPAA 164.404 / 164.410: individuals, or the covered entity": d.timestamp() + 60 * 86400,
        "EU AI Act Art. 73: market-surveillance authority": d.timestamp() + 15 * 86400,
    }
    for name, ts in want.items():
        assert datetime.fromisoformat(found[name].replace("Z", "+00:00")).timestamp() == ts, name
    # materiality on Friday 2026-09-11 16:00: four business days later is Thursday 2026-09-17
    assert found["SEC Form 8-K Item 1.05"] == "2026-09-17T16:00:00.000Z"
    assert "GDPR Art. 33(2): each controller (customer)" in md  # role = processor
    assert re.search(r"\(([\d.,]+) h left as of 2026-09-10T09:00:00.000Z\)", md)


def test_add_business_days_skips_weekends() -> None:
    friday = datetime(2026, 9, 11, 16, tzinfo=UTC)
    assert add_business_days(friday, 4) == datetime(2026, 9, 17, 16, tzinfo=UTC)
    assert add_business_days(datetime(2026, 9, 14, tzinfo=UTC), 4) == datetime(2026, 9, 18, tzinfo=UTC)


def test_timeline_rows_are_sorted_and_sourced(runs: dict[str, Path]) -> None:
    md = (runs["full"] / "report.md").read_text()
    part = md[md.index("## 5. Timeline") : md.index("## Part 2.")]
    rows = [r.split(" | ") for r in part.splitlines() if r.startswith("| 20")]
    assert [r[0] for r in rows] == sorted(r[0] for r in rows) and len(rows) >= 6
    assert all(r[2].strip(" |") for r in rows)
    assert any("Prefill pools resized" in r[1] and "OPS-1234" in r[2] for r in rows)


@pytest.mark.parametrize(
    "extra,says",
    [
        ('role = "vendor"', "role 'vendor' must be one of processor, controller"),
        ('hipaa = "yes"', "hipaa must be true or false"),
        ("data_categories = 3", "data_categories must be a list of strings"),
        ('[[disclosure.timeline]]\nat = 2026-09-01T00:00:00Z\nevent = "x"', "timeline entry 1 lacks source"),
    ],
)
def test_bad_disclosure_fields_are_refused(runs: dict[str, Path], tmp_path: Path, extra: str, says: str) -> None:
    b = tmp_path / "b"
    shutil.copytree(runs["aborts"].parent / "bundle", b)
    text = (b / "bundle.toml").read_text() + "\n[disclosure]\n" + extra + "\n"
    (b / "bundle.toml").write_text(text)
    with pytest.raises(InputError, match=re.escape(says)):
        investigate(b, tmp_path / "out")


def _pdf_pages(browser: str, html: Path, pdf: Path, profile: Path) -> int:
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={profile}"]
    res = subprocess.run(
        [*flags, "--no-pdf-header-footer", f"--print-to-pdf={pdf}", html.resolve().as_uri()],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return len(re.findall(rb"/Type\s*/Page[^s]", pdf.read_bytes()))


def test_the_summary_fits_its_page_budget_and_each_part_renders(sample_out: Path, tmp_path: Path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed: the printed page budget is not checked")
    html = (sample_out / "report.html").read_text()
    a = html.index('<section id="notifications"')
    summary = tmp_path / "summary.html"
    summary.write_text(html[:a] + html[html.index("</section>", a) + len("</section>") :])
    pages = _pdf_pages(browser, summary, tmp_path / "summary.pdf", tmp_path / "p1")
    assert 1 <= pages <= PAGE_BUDGET, f"the disclosure summary prints on {pages} pages (budget {PAGE_BUDGET})"
    whole = _pdf_pages(browser, sample_out / "report.html", tmp_path / "report.pdf", tmp_path / "p2")
    assert whole > pages  # the notification annex follows on pages of its own
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
    flags.append(f"--user-data-dir={tmp_path / 'p3'}")
    for name in ("summary.html", "report.html", "technical_annex.html"):
        src = summary if name == "summary.html" else sample_out / name
        shot = tmp_path / name.replace(".html", ".png")
        res = subprocess.run(
            [*flags, "--window-size=1200,3000", f"--screenshot={shot}", src.resolve().as_uri()],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert res.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        print(f"screenshot: {shot}")
    print(f"summary: {pages} printed pages; report.html with the notification annex: {whole}")
