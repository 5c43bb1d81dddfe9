"""The disclosure report and the blast-radius files (forensics.report, forensics.report.blast).

Golden snapshot of report.md on the contract's worked example: a change there is a change to the
output contract and should be read in the diff (regenerate with UPDATE_GOLDEN=1).
"""

from __future__ import annotations

import csv
import difflib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from forensics.paths import PACKAGE, query_dir
from forensics.pipeline import investigate
from forensics.report.render import md_escape
from tests import support

EXAMPLE = support.EXAMPLE / "bundle"
HOSTILE = "<script>alert(1)</script>"
BLAST_CSVS = (
    "notifications.csv",
    "blast_matrix.csv",
    "blast_nodes.csv",
    "blast_hours.csv",
    "blast_sources.csv",
    "shared_prefix.csv",
)


@pytest.fixture(scope="module")
def example_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("example")
    investigate(EXAMPLE, out)
    return out


@pytest.fixture(scope="module")
def hostile_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example with a script tag as req-B's account and user agent, and a formula as req-A's account."""
    base = tmp_path_factory.mktemp("hostile")
    bundle = base / "bundle"
    shutil.copytree(EXAMPLE, bundle)
    gateway = bundle / "gateway" / "gateway.jsonl"
    rows = [json.loads(line) for line in gateway.read_text().splitlines()]
    for r in rows:
        if r["request_id"] == "req-B":
            r["account_id"] = r["user_agent"] = HOSTILE
        if r["request_id"] == "req-A":
            r["account_id"] = '=HYPERLINK("http://evil")'
    gateway.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with (bundle / "bundle.toml").open("a") as fh:
        fh.write('\n[remediation]\ncontainment = "<img src=x onerror=alert(2)>"\nfix = ["zero pages", "salt"]\n')
    investigate(bundle, base / "out")
    return base / "out"


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("name", ["report.md", "technical_annex.md", "report.html"])
def test_report_parts_match_golden(example_out: Path, name: str) -> None:
    """The disclosure's parts on the contract's example, byte for byte (HTML too: its structure and
    text are part of the contract a reader relies on)."""
    golden = support.GOLDEN / name.replace(".", "_example.", 1)
    got = (example_out / name).read_text()
    if os.environ.get("UPDATE_GOLDEN"):
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(got)
    want = golden.read_text()
    if got != want:
        diff = difflib.unified_diff(want.splitlines(True), got.splitlines(True), "golden", name)
        print("".join(diff))
        pytest.fail(f"{name} differs from {golden.relative_to(support.ROOT)} (diff above; UPDATE_GOLDEN=1 to accept)")


def test_headline_equals_customer_rows_of_affected_responses(example_out: Path) -> None:
    md = (example_out / "report.md").read_text()
    customer = [r for r in read_csv(example_out / "affected_responses.csv") if r["cohort"] == "customer"]
    m = re.search(r"Affected customer responses: \*\*([\d,]+)\*\* \(([\d,]+) confirmed", md)
    assert m, "headline missing from report.md"
    assert int(m.group(1).replace(",", "")) == len(customer) == 1
    assert int(m.group(2)) == sum(r["status"] == "confirmed" for r in customer)
    html = (example_out / "report.html").read_text()
    assert f'id="headline-customer">{len(customer)}<' in html


def test_report_sections_and_facts(example_out: Path) -> None:
    md = (example_out / "report.md").read_text()
    for heading in (
        "Headline",
        "1. Clocks and deadlines",
        "2. Nature of the breach",
        "3. Scope and certainty",
        "4. Disclosure fields",
        "5. Timeline",
        "Part 2. Notification annex",
    ):
        assert f"## {heading}" in md
    assert "- GDPR Art. 33: supervisory authority: 2026-09-01T12:00:00.000Z" in md
    assert "no generation time recorded" in md
    assert "| Measures taken or proposed (Art. 33(3)(d)) | — | **missing**: \\[remediation\\] |" in md
    annex = (example_out / "technical_annex.md").read_text()
    for heading in (
        "T1. Root-cause evidence",
        "T2. Scope and certainty",
        "T3. Blast radius",
        "T4. Exclusions",
        "T5. Per-account annex",
        "T6. Negative findings",
        "T7. Methodology and limitations",
        "T8. Per-response provenance",
        "T9. Evidence manifest",
    ):
        assert f"## {heading}" in annex
    assert "| prefill-0 | decode-0 | 4,090 | 8,186 | yes |" in annex  # the leak window
    assert "STALE-KV READ  req-B (acct-bravo, customer) HTTP 200, 3 tokens" in annex
    assert "slots [17,56) written by req-A (acct-alpha, customer)" in annex
    assert "FOREIGN WRITE  req-D (acct-delta, internal-test)" in annex


def test_notifications_both_directions(example_out: Path) -> None:
    rows = {r["account_id"]: r for r in read_csv(example_out / "notifications.csv")}
    assert set(rows) == {"acct-alpha", "acct-bravo", "acct-charlie"}  # acct-delta is internal: not notified
    assert rows["acct-bravo"]["received_request_ids"] == "req-B"
    assert rows["acct-bravo"]["requests_exposed"] == "0"
    # customer data shown to an internal test is still customer data exposed
    assert rows["acct-charlie"]["exposed_request_ids"] == "req-C"
    assert rows["acct-charlie"]["recipient_cohorts"] == "internal-test"
    assert rows["acct-charlie"]["exposed_first_at"] == "2026-08-29T10:40:20.691Z"
    matrix = {(r["recipient_cohort"], r["source_cohort"]): r for r in read_csv(example_out / "blast_matrix.csv")}
    assert set(matrix) == {("customer", "customer"), ("internal-test", "customer")}
    assert matrix[("internal-test", "customer")]["slots"] == "20"


def test_byte_identical_on_rerun(example_out: Path, tmp_path: Path) -> None:
    investigate(EXAMPLE, tmp_path)
    for name in ("report.html", "report.md", "technical_annex.html", "technical_annex.md", *BLAST_CSVS):
        assert (tmp_path / name).read_bytes() == (example_out / name).read_bytes(), name


def test_as_of_is_the_only_time_of_generation(tmp_path: Path) -> None:
    investigate(EXAMPLE, tmp_path, as_of="2026-08-30T12:00:00Z")
    md = (tmp_path / "report.md").read_text()
    assert "as of 2026-08-30T12:00:00.000Z" in md and "(48.0 h left as of" in md


@pytest.mark.parametrize("part", ["report", "technical_annex"])
def test_hostile_strings_escaped_in_html_and_md(hostile_out: Path, part: str) -> None:
    html = (hostile_out / f"{part}.html").read_text()
    assert HOSTILE not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    if part == "report":  # [remediation] (a disclosure field) is shown in the summary only
        assert "&lt;img src=x onerror=alert(2)&gt;" in html
    assert "<script" not in html.lower()  # the report itself needs no script at all
    md = (hostile_out / f"{part}.md").read_text()
    outside_code = re.sub(r"```text\n.*?\n```", "", md, flags=re.S)  # code blocks show text literally
    assert HOSTILE not in outside_code and "&lt;script>alert(1)&lt;/script>" in outside_code
    if part == "report":  # [remediation] is a disclosure field: the summary shows it
        assert "zero pages; salt" in md


def test_csv_cells_neutralized(hostile_out: Path) -> None:
    seen_formula = False
    for name in BLAST_CSVS:
        with (hostile_out / name).open(newline="") as fh:
            for row in csv.reader(fh):
                for cell in row:
                    assert not cell.startswith(("=", "+", "-", "@")), (name, cell)
                    seen_formula |= cell.startswith("'=HYPERLINK")
    assert seen_formula, "the formula account should appear, neutralized, in notifications.csv"


def test_md_escape_keeps_tables_and_tags_inert() -> None:
    assert md_escape("a|b") == "a\\|b"
    assert md_escape("<b>") == "&lt;b>"
    assert md_escape("line\nbreak") == "line break"
    assert md_escape("foreign_write") == "foreign_write" and md_escape("_x_") == "\\_x\\_"


def test_every_report_query_is_used() -> None:
    sources = "".join(p.read_text() for p in PACKAGE.rglob("*.py"))
    for sql in sorted(query_dir("report").glob("*.sql")):
        assert f'"{sql.stem}"' in sources, f"{sql.name} is not used"
        assert sql.read_text().startswith("-- "), f"{sql.name} lacks its header comment"


def test_renders_in_headless_chromium(example_out: Path, tmp_path: Path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install chromium): browser rendering not checked")
    flags = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=1200,3000",
    ]
    url = (example_out / "report.html").resolve().as_uri()
    shot = example_out / "report.png"
    res = subprocess.run([*flags, f"--screenshot={shot}", url], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    dom = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "INC-EXAMPLE: Worked example of the contract" in dom.stdout
    assert re.search(r'id="headline-customer">1<', dom.stdout)
    assert "<svg" in dom.stdout and "Uncaught" not in dom.stderr and "Refused to" not in dom.stderr
    print(f"screenshot: {shot}")


def test_md_escape_fast_path_equals_the_full_escape() -> None:
    import random

    from forensics.report.render import MD_SPECIAL, md_escape

    rng = random.Random(1)
    chars = "ab_-#>*[]|\\`<\r\n x1"
    for _ in range(5000):
        text = "".join(rng.choice(chars) for _ in range(rng.randint(0, 8)))
        full = MD_SPECIAL.sub(lambda m: "\\" + m.group(0), text.replace("<", "&lt;"))
        assert md_escape(text) == full.replace("\r", " ").replace("\n", " "), text


def test_leak_window_is_half_open_and_the_audits_own() -> None:
    """[prefill limit, decode limit), as SGLang tests it (len >= max_req_input_len is over-length): a
    prompt of exactly the prefill limit is in the window, one of exactly the decode limit is not; the
    report's window is the one audit-config computes for the same pools."""
    from forensics.audit.model import ServerAudit
    from forensics.audit.verdict import attach_leak_windows
    from forensics.db import connect, query_rows
    from forensics.engines.sglang import max_req_input_len
    from forensics.paths import query_dir

    ctx, pre_pool, dec_pool = 1_048_576, 681_280, 4_194_304
    lo, hi = max_req_input_len(ctx, pre_pool), max_req_input_len(ctx, dec_pool)
    assert (lo, hi) == (681_274, 1_048_570)
    con = connect(":memory:")
    con.execute(
        "CREATE TABLE node_config AS SELECT * FROM (VALUES ('p', 1, ?, ?::BIGINT, NULL::BIGINT, 'sglang'), "
        "('d', 1, ?, ?::BIGINT, NULL::BIGINT, 'sglang')) t(node, line, context_len, pool_tokens, max_total_num_tokens, "
        "engine)",
        [ctx, pre_pool, ctx, dec_pool],
    )
    con.execute((query_dir("ingest") / "schema" / "12_node_limits.sql").read_text())  # the view ingest makes
    lengths = [lo - 1, lo, lo + 1, hi - 1, hi, hi + 1]
    con.execute("CREATE TABLE gateway (prefill_node TEXT, decode_node TEXT, prompt_tokens BIGINT)")
    con.executemany("INSERT INTO gateway VALUES ('p', 'd', ?)", [[n] for n in lengths])
    (window,) = query_rows(con, "report", "leak_windows")
    assert (window["window_start"], window["window_end"]) == (lo, hi)
    assert window["requests_in_window"] == sum(lo <= n < hi for n in lengths) == 3
    audits = []
    for role, pool in (("prefill", pre_pool), ("decode", dec_pool)):
        a = ServerAudit(path=role, node=role, engine="sglang", role=role)
        a.context_len, a.pool_tokens, a.max_req_input_len = ctx, pool, max_req_input_len(ctx, pool)
        audits.append(a)
    attach_leak_windows(audits)
    assert (audits[0].leak_windows[0]["start"], audits[0].leak_windows[0]["end"]) == (lo, hi)
