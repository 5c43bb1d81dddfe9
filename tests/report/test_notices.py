"""Issue #34, per-account notices and the board brief: a notice per account that lists exactly the
requests notifications.csv counts (checked against affected_responses.csv and exposures.csv too),
mail merge that matches, hostile account ids kept inside the folder and escaped, an edited template's
mistakes named by file and line, `forensics notices` rendering the same files from the database alone,
and printed layouts that fit: the brief on one A4 page, Part 2 within about a page per 30 accounts."""

from __future__ import annotations

import csv
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import duckdb
import pytest

from forensics.errors import InputError
from forensics.report.mail_merge import CELL_LIMIT, MERGE_HEADER, _ids
from forensics.report.notices import (
    _requests_by_account,
    _with_requests,
    notice_stems,
    render_notices,
)

ROLE_COUNTS = {
    "received": "responses_received",
    "exposed": "requests_exposed",
    "possibly_exposed": "requests_possibly_exposed",
}


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _copy_out(src: Path, dst: Path) -> Path:
    """An investigate output folder of our own to render into (the session's sample_out is shared)."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("possible_sources.csv", "*.csv.gz"))
    return dst


def test_a_notice_per_account_listing_what_notifications_csv_counts(sample_out: Path) -> None:
    notifications = _csv(sample_out / "notifications.csv")
    folder = sample_out / "notices"
    requests = _csv(folder / "requests.csv")
    merge = _csv(folder / "mail_merge.csv")
    assert notifications and len(merge) == len(notifications)
    stems = notice_stems(n["account_id"] for n in notifications)
    per_role = Counter((r["account_id"], r["role"]) for r in requests)
    for n, m in zip(notifications, merge, strict=True):
        a = n["account_id"]
        assert m["account_id"] == a
        assert m["notice_files"] == f"{stems[a]}.html;{stems[a]}.txt"
        text = (folder / f"{stems[a]}.txt").read_text()
        html = (folder / f"{stems[a]}.html").read_text()
        for role, col in ROLE_COUNTS.items():
            assert per_role[(a, role)] == int(n[col]), (a, role)
            ids = [r["request_id"] for r in requests if r["account_id"] == a and r["role"] == role]
            assert m[f"{role}_request_ids"] == ";".join(ids)
            for rid in ids:  # every id, possible ones included, in both files of the account
                assert rid in text and rid in html, (a, role, rid)
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [f"{s}.{ext}" for s in stems.values() for ext in ("html", "txt")] + ["mail_merge.csv", "requests.csv"]
    )
    with (folder / "mail_merge.csv").open() as f:
        assert tuple(next(csv.reader(f))) == MERGE_HEADER


def test_notices_agree_with_the_findings_files(sample_out: Path) -> None:
    """Independently of notice_requests: every customer response in affected_responses.csv is in its
    account's received list, and every source request of the customer cohort in exposures.csv is in its
    account's exposed list."""
    requests = _csv(sample_out / "notices" / "requests.csv")
    listed = {(r["account_id"], r["role"], r["request_id"]) for r in requests}
    affected = [a for a in _csv(sample_out / "affected_responses.csv") if a["cohort"] == "customer" and a["account_id"]]
    assert affected
    for a in affected:
        assert (a["account_id"], "received", a["request_id"]) in listed
    # a customer's data is notified whoever received it (an internal test's response too)
    exposed = {
        (e["source_account_id"], e["source_request_id"])
        for e in _csv(sample_out / "exposures.csv")
        if e["source_cohort"] in ("customer", "") and e["source_account_id"]
    }
    assert exposed
    for account, rid in exposed:
        assert (account, "exposed", rid) in listed


def test_notice_rerendered_from_the_database_alone(sample_out: Path, tmp_path: Path) -> None:
    out = _copy_out(sample_out, tmp_path / "out")
    before = {p.name: p.read_bytes() for p in (out / "notices").iterdir()}
    shutil.rmtree(out / "notices")
    r = subprocess.run([sys.executable, "-m", "forensics", "notices", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert {p.name: p.read_bytes() for p in (out / "notices").iterdir()} == before
    # an operator's own template: its kind of file from its name, given what docs/notices.md lists
    own = tmp_path / "letter.md.j2"
    own.write_text(
        "# {{ incident.id }} for {{ account.account_id }}\n"
        "{% for role, rows in requests.items() %}{{ role }}: {{ rows|length }}\n{% endfor %}"
    )
    r = subprocess.run(
        [sys.executable, "-m", "forensics", "notices", str(out), "--template", str(own)], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    notifications = _csv(out / "notifications.csv")
    files = sorted(p.name for p in (out / "notices").iterdir() if p.suffix == ".md")
    assert len(files) == len(notifications)
    n = notifications[0]
    md = (out / "notices" / f"{notice_stems([n['account_id']])[n['account_id']]}.md").read_text()
    for role, col in ROLE_COUNTS.items():
        assert f"{role}: {int(n[col])}\n" in md


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{% if %}", r"line 1"),
        ("ok\n\n{{ account.account_id }\n", r"line 3"),
        ("{{ account.no_such_field }}", r"no_such_field"),
        ("{{ ''.__class__.__mro__ }}", r"unsafe|__class__|__mro__"),  # the sandbox: no reach into Python
    ],
)
def test_template_mistakes_are_named_by_file(sample_out: Path, tmp_path: Path, text: str, says: str) -> None:
    out = _copy_out(sample_out, tmp_path / "out")
    bad = tmp_path / "bad.html.j2"
    bad.write_text(text)
    r = subprocess.run(
        [sys.executable, "-m", "forensics", "notices", str(out), "--template", str(bad)], capture_output=True, text=True
    )
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    assert str(bad) in r.stderr and re.search(says, r.stderr), r.stderr


def test_template_refusals(sample_out: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        render_notices(sample_out, [tmp_path / "missing.txt.j2"])
    a, b = tmp_path / "a.txt.j2", tmp_path / "b.txt.j2"
    a.write_text("x")
    b.write_text("y")
    with pytest.raises(InputError, match="same kind of file"):
        render_notices(sample_out, [a, b])
    with pytest.raises(InputError, match="no incident.duckdb"):
        render_notices(tmp_path, None)


def test_a_bad_notice_template_stops_investigate_before_the_analysis(tmp_path: Path) -> None:
    from forensics.pipeline import investigate
    from tests.support import SAMPLE

    bad = tmp_path / "bad.txt.j2"
    bad.write_text("{% for %}")
    with pytest.raises(InputError, match=r"bad\.txt\.j2: line 1"):
        investigate(SAMPLE, tmp_path / "out", notice_templates=[bad])
    assert not (tmp_path / "out").exists()  # refused before --out was made


SCRIPT, FORMULA = "../../escape<script>alert(1)</script>", '=HYPERLINK("http://evil")'
# the last two have the same safe name ignoring case
HOSTILE = (SCRIPT, FORMULA, "ACCT-X\x1b[31m\u202ered", "acct-x\x1b[31m\u202eRED")


def test_hostile_account_ids(sample_out: Path, tmp_path: Path) -> None:
    out = _copy_out(sample_out, tmp_path / "case" / "out")
    con = duckdb.connect(str(out / "incident.duckdb"))
    have = [r[0] for r in con.execute("SELECT DISTINCT account_id FROM internal.notice_requests ORDER BY 1").fetchall()]
    for old, new in zip(have, HOSTILE, strict=False):
        con.execute("UPDATE internal.notice_requests SET account_id = ? WHERE account_id = ?", [new, old])
    con.close()
    render_notices(out)
    folder = out / "notices"
    inside = {p.resolve().parent for p in folder.rglob("*")}
    assert inside == {folder.resolve()}  # nothing written outside notices/
    assert not (tmp_path / "case" / "escape<script>alert(1)</script>.html").exists()
    stems = notice_stems(HOSTILE)
    assert len({s.lower() for s in stems.values()}) == len(HOSTILE)  # apart on case-blind file systems
    for stem in stems.values():
        assert re.fullmatch(r"[A-Za-z0-9._-]+", stem) and not stem.startswith(".")
        html = (folder / f"{stem}.html").read_text()
        text = (folder / f"{stem}.txt").read_text()
        assert "<script>" not in html and "\x1b" not in html + text and "\u202e" not in text
    assert "&lt;script&gt;" in (folder / f"{stems[SCRIPT]}.html").read_text()
    merge = {r["account_id"] for r in _csv(folder / "mail_merge.csv")}
    assert "'" + FORMULA in merge  # a formula cell is neutralized
    requests = {r["account_id"] for r in _csv(folder / "requests.csv")}
    assert "'" + FORMULA in requests


def test_mail_merge_cells_fit_a_spreadsheet() -> None:
    ids = [f"req-{i:012x}" for i in range(5000)]
    cell = _ids(ids)
    assert len(cell) <= CELL_LIMIT + 40
    shown = cell.split(";...")[0].split(";")
    assert shown == ids[: len(shown)]
    assert f"({len(ids) - len(shown):,} more: requests.csv)" in cell
    assert _ids(ids[:10]) == ";".join(ids[:10])


def test_brief_repeats_the_reports_headline(sample_out: Path) -> None:
    """One headline, written once: the brief prints the report's lead sentence (minus its section
    reference) and the notification count of notifications.csv."""
    report = (sample_out / "report.html").read_text()
    brief = (sample_out / "brief.html").read_text()
    lead = re.search(r'<p class="lead">(.*?)</p>', report, re.S).group(1)
    assert lead.replace(", section 2)", ")") in brief
    accounts = len(_csv(sample_out / "notifications.csv"))
    assert re.search(rf"Accounts to notify</th><td class=\"n\">{accounts:,}</td>", brief)
    assert "undated" in brief  # the session's run has no --as-of: said, not hidden


def _pdf_pages(html: Path, pdf: Path) -> int:
    pypdf = pytest.importorskip("pypdf")
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        pytest.skip("no Chromium to print with")
    subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-pdf-header-footer",
         f"--print-to-pdf={pdf}", html.as_uri()],
        capture_output=True, timeout=120, check=True,
    )  # fmt: skip
    return len(pypdf.PdfReader(str(pdf)).pages)


@pytest.mark.slow
def test_printed_layouts(sample_out: Path, tmp_path: Path) -> None:
    assert _pdf_pages(sample_out / "brief.html", tmp_path / "brief.pdf") == 1
    accounts = len(_csv(sample_out / "notifications.csv"))
    report = _pdf_pages(sample_out / "report.html", tmp_path / "report.pdf")
    # Part 1 has its page budget (test_disclosure: 5); Part 2 about a page per 30 accounts
    assert report <= 5 + -(-accounts // 30) + 1, report


def test_notice_requests_streamed_one_account_at_a_time() -> None:
    """The notices take each account's requests from a stream of notice_requests in account order
    (DuckDB's byte order of VARCHAR against Python's code-point order of str), read in chunks that split
    accounts: every account gets exactly its rows, by role, whatever the chunk; an account with no row
    gets none; rows of an account no notification names are passed over."""
    con = duckdb.connect()
    con.execute("CREATE TABLE notice_requests (account_id VARCHAR, role VARCHAR, request_id VARCHAR)")
    ids = ["Zed", "a", "a-1", "é", "ß", "日本", "\u00e9x", "~", "A", "b"]
    rows = [(acc, role, f"{acc}-{role}-{k}") for i, acc in enumerate(ids) for role in ("received", "possibly_exposed")
            for k in range(i % 3)]  # fmt: skip
    con.executemany("INSERT INTO notice_requests VALUES (?, ?, ?)", rows)
    want: dict[str, Counter] = {acc: Counter() for acc in ids}
    for acc, role, rid in rows:
        want[acc][(role, rid)] += 1
    told = sorted(set(ids) - {"a-1", "~"} | {"none-1", "zz"})  # accounts without rows; rows without an account
    for chunk in (1, 2, 3, 10_000):
        got = dict(
            (a["account_id"], Counter((role, r["request_id"]) for role, rs in req.items() for r in rs))
            for a, req in _with_requests([{"account_id": x} for x in told], _requests_by_account(con, chunk))
        )  # fmt: skip
        assert list(got) == told
        for acc in told:
            assert got[acc] == want.get(acc, Counter()), (chunk, acc)
