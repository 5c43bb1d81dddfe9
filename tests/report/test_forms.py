"""Issue #51, the regulator's forms: the GDPR Art. 33 form filled from the findings (open fields named
with their bundle.toml key), the notified accounts' jurisdictions with each rule's deadline, statute and
read-on date (from the shipped table or an operator's own), the California notice's five headings, all
escaped, and the pages Chromium prints. Expectations come from the findings CSVs and the simulator's
truth, never from the forms themselves."""

from __future__ import annotations

import csv
import re
import shutil
import subprocess
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from forensics.errors import InputError
from forensics.intake import load_bundle_config
from forensics.intake.jurisdictions import SHIPPED_RULES, load_rules
from forensics.pipeline import investigate
from forensics.report.jurisdictions import jurisdiction_rows
from forensics.simulate import build_config, simulate

CA_HEADINGS = ["What Happened", "What Information Was Involved", "What We Are Doing", "What You Can Do",
               "For More Information"]  # fmt: skip
HOSTILE = "<script>alert(1)</script>|*x*"
AS_OF = datetime(2026, 9, 10, 9, tzinfo=UTC)

OPERATOR_RULES = """
[[rule]]
jurisdiction = "US-CA"
name = "Operator CA: residents"
notify = "individuals"
days = 30
after = "discovered_at"
basis = "30 calendar days"
applies = "accounts"
statute = "Cal. Civ. Code 1798.82(a)(2)"
source = "https://example.org/ca"
read_on = 2026-12-06

[[rule]]
jurisdiction = "US-CA"
name = "Operator CA: Attorney General"
notify = "attorney general"
days = 15
after = "individuals_notified_at"
basis = "15 days after the residents"
applies = "accounts"
min_residents = 501
statute = "Cal. Civ. Code 1798.82(f)"
source = "https://example.org/ca-ag"
read_on = 2026-12-06

[[rule]]
jurisdiction = "EU"
name = "GDPR Art. 33: supervisory authority"
notify = "supervisory authority"
hours = 72
after = "discovered_at"
basis = "72 h"
applies = "always"
statute = "GDPR Art. 33(1)"
source = "https://example.org/gdpr"
read_on = 2026-12-06
"""


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _md_rows(md: str, section: str) -> dict[str, str]:
    part = md[md.index(section) :]
    part = part[: part.index("\n## ", 1)] if "\n## " in part[1:] else part
    cells = [re.split(r"(?<!\\)\|", line)[1:-1] for line in part.splitlines() if line.startswith("| ")]
    return {c[0].strip(): c[1].strip() for c in cells if len(c) == 2}


def test_edpb_form_is_filled_from_the_findings(sample_out: Path) -> None:
    md = (sample_out / "edpb_art33.md").read_text()
    html = (sample_out / "edpb_art33.html").read_text()
    notified = _csv(sample_out / "notifications.csv")
    comm = _md_rows(md, "## 6. Communication")
    assert comm["Accounts to notify (notifications.csv)"].startswith(f"{len(notified):,},")
    # the sample's bundle.toml maps no account: every notified account is of unknown jurisdiction, counted
    assert comm["Their jurisdictions (report section 1)"] == f"unknown ({len(notified):,})"
    nature = _md_rows(md, "## 3. Nature")
    affected = _csv(sample_out / "affected_responses.csv")
    for kind, name in (("stale", "stale reads"), ("foreign_write", "late writes")):
        hit = [a for a in affected if kind in a["kinds"].split(";")]
        customer = [a for a in hit if a["cohort"] == "customer"]
        sure = sum(a["status"] == "confirmed" for a in customer)
        said = (
            f"{name}: {len(customer):,} customer responses ({sure:,} confirmed, {len(customer) - sure:,} "
            f"indeterminate), {len(hit):,} in all cohorts"
        )
        assert (said in nature["Description"]) == bool(hit), said
    first = min(a["first_exposed_at"] for a in affected)
    assert nature["Start (first response that may be affected)"].startswith(first[:19].replace(" ", "T"))
    # the sample's bundle.toml has no [disclosure]: each field only a person can fill is open, with its key
    opened = re.findall(r"\*\*open\*\*: bundle\.toml \\\[(\w+)\\\] ?(\w*)", md)
    keys = {f"{a}.{b}" if b else a for a, b in opened}
    assert {"disclosure.controller", "disclosure.dpo", "disclosure.role", "remediation"} <= keys
    count = int(re.search(r"\*\*Open fields \((\d+)\):\*\*", md).group(1))
    undated = "**open**: --as-of" in md  # the session's run has no --as-of: the lateness is open too
    assert count == len(opened) + undated and html.count("<strong>open</strong>: ") == count
    # the filled record count is the report's own field, written once
    report = (sample_out / "report.md").read_text()
    assert nature["Approximate number of records"] in report


def test_the_sample_report_counts_every_notified_account(sample_out: Path) -> None:
    md = (sample_out / "report.md").read_text()
    notified = len(_csv(sample_out / "notifications.csv"))
    assert f"- unknown: {notified:,} accounts to notify: **jurisdiction unknown**" in md


@pytest.fixture(scope="module")
def mapped(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A simulated incident whose bundle.toml names an operator's rules and an accounts file mapping the
    customer accounts of the simulator's truth to CA (with residents), TX (no counts), a code no rule
    covers, and none (every fourth account), with hostile text in the form's fields."""
    tmp = tmp_path_factory.mktemp("forms")
    simulate(tmp / "sim", build_config("default", seed=31, requests=350, abort_rate=0.05, allocator="lifo"))
    bundle = tmp / "sim" / "bundle"
    truth = _csv(tmp / "sim" / "truth" / "responses.csv")
    accounts = sorted({r["account_id"] for r in truth if r["cohort"] == "customer"})
    places = {}
    with (bundle / "accounts.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["account_id", "jurisdiction", "residents"])
        for i, a in enumerate(accounts):
            if i % 4 == 0:
                w.writerow([a, "US-CA", 300])
                w.writerow([a, "US-TX", ""])  # one account in two jurisdictions: counted in each
                places[a] = ["US-CA", "US-TX"]
            elif i % 4 == 1:
                w.writerow([a, "US-CA", 300])
                places[a] = ["US-CA"]
            elif i % 4 == 2:
                w.writerow([a, "ZZ-ZZ", ""])
                places[a] = ["ZZ-ZZ"]
    (bundle / "rules.toml").write_text(OPERATOR_RULES)
    text = (bundle / "bundle.toml").read_text()
    text += '\n[disclosure]\njurisdictions_file = "rules.toml"\naccounts_file = "accounts.csv"\n'
    text += f'controller = "{HOSTILE}"\n'
    (bundle / "bundle.toml").write_text(text)
    investigate(bundle, tmp / "out", as_of=AS_OF.isoformat(), notice_templates=[Path("california")])
    return {"out": tmp / "out", "bundle": bundle, "places": places}


def test_operator_jurisdictions_table(mapped: dict) -> None:
    out = mapped["out"]
    md = (out / "report.md").read_text()
    notified = [n["account_id"] for n in _csv(out / "notifications.csv")]
    want = Counter(j for a in notified for j in mapped["places"].get(a, ["unknown"]))
    got = dict(re.findall(r"^- ([\w-]+): ([\d,]+) accounts? to notify", md, re.M))
    assert {k: int(v.replace(",", "")) for k, v in got.items()} == dict(want) and want
    # the operator's rules, not the shipped ones, with their deadline from discovered_at
    disc = load_bundle_config(mapped["bundle"]).discovered_at
    due = (disc + timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%S")
    assert re.search(rf"\*\*Operator CA: residents\*\* \(individuals\): {due}", md)
    assert "California: residents" not in md and "ZZ-ZZ in" in md
    # the AG threshold: 300 residents per CA account, decided only where the counts prove it
    ca = want["US-CA"] * 300
    line = next(x for x in md.splitlines() if "Operator CA: Attorney General" in x)
    assert ("applies: " if ca >= 501 else "does not apply: ") + f"{ca:,} residents supplied" in line
    assert "**missing**: cannot be computed without" in line and "individuals_notified_at" in line


def test_hostile_fields_are_escaped_in_the_form(mapped: dict) -> None:
    html = (mapped["out"] / "edpb_art33.html").read_text()
    md = (mapped["out"] / "edpb_art33.md").read_text()
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script" not in md and "\\|\\*x\\*" in md


def test_california_notice_has_the_five_headings(mapped: dict) -> None:
    notified = _csv(mapped["out"] / "notifications.csv")
    files = sorted((mapped["out"] / "notices").glob("*.html"))
    assert len(files) == len(notified) and files
    for f in files[:20]:
        text = f.read_text()
        assert re.findall(r"<h2>(.*?)</h2>", text) == CA_HEADINGS
        assert "<h1>Notice of Data Breach</h1>" in text and "11pt" in text  # at least 10-point type


@pytest.mark.parametrize(
    "rules,says",
    [
        (OPERATOR_RULES.replace('source = "https://example.org/ca"\n', ""), "rule 1: lacks source"),
        (OPERATOR_RULES.replace('applies = "always"', 'applies = "sometimes"'), "applies 'sometimes' must be one of"),
        (OPERATOR_RULES.replace("read_on = 2026-12-06", 'read_on = "last week"', 1), "read_on must be a TOML date"),
        (OPERATOR_RULES.replace("days = 30", "days = 30\nhours = 2", 1), "give one of hours, days, business_days"),
    ],
)
def test_bad_rules_are_refused_before_the_analysis(tmp_path: Path, rules: str, says: str) -> None:
    (tmp_path / "rules.toml").write_text(rules)
    (tmp_path / "bundle.toml").write_text('[disclosure]\njurisdictions_file = "rules.toml"\n')
    with pytest.raises(InputError, match=re.escape(says)):
        load_bundle_config(tmp_path)


@pytest.mark.parametrize(
    "accounts,says",
    [
        ("account,state\na,US-CA\n", "the header must name account_id and jurisdiction"),
        ("account_id,jurisdiction,residents\na,US-CA,many\n", "line 2: residents 'many'"),
        ("account_id,jurisdiction\na,US-CA\na,US-CA\n", "line 3: account 'a' is mapped to US-CA twice"),
    ],
)
def test_bad_accounts_files_are_refused(tmp_path: Path, accounts: str, says: str) -> None:
    (tmp_path / "accounts.csv").write_text(accounts)
    (tmp_path / "bundle.toml").write_text('[disclosure]\naccounts_file = "accounts.csv"\n')
    with pytest.raises(InputError, match=re.escape(says)):
        load_bundle_config(tmp_path)


def test_shipped_rules_cite_a_source_and_a_read_on_date() -> None:
    rules, _ = load_rules(SHIPPED_RULES)
    assert {r.jurisdiction for r in rules} >= {"EU", "US", "US-CA", "US-NY", "US-TX"}
    assert all(r.source.startswith("https://") and r.statute and r.read_on for r in rules)
    ca = {r.name: r for r in rules if r.jurisdiction == "US-CA"}
    assert ca["California: residents"].amount == 30 and ca["California: residents"].unit == "days"
    assert ca["California: Attorney General (sample copy)"].min_residents == 501


def test_residents_threshold_is_decided_only_where_the_counts_prove_it(tmp_path: Path) -> None:
    (tmp_path / "accounts.csv").write_text("account_id,jurisdiction,residents\na,US-CA,400\nb,US-CA,\nc,US-CA,200\n")
    (tmp_path / "bundle.toml").write_text(
        '[incident]\ndiscovered_at = 2026-09-09T14:05:00Z\n[disclosure]\naccounts_file = "accounts.csv"\n'
    )
    config = load_bundle_config(tmp_path)
    ag = "California: Attorney General (sample copy)"

    def threshold(ids: list[str]) -> str:
        row = jurisdiction_rows(config, ids, AS_OF)["rows"][0]
        return next(d["threshold"] for d in row["deadlines"] if d["name"] == ag)

    assert threshold(["a", "c"]).startswith("applies: 600")  # every count given, over 500
    assert threshold(["a"]).startswith("does not apply: 400")  # every count given, under 501
    assert threshold(["a", "b"]).startswith("to assess")  # 400 known, one account without a count
    rows = jurisdiction_rows(config, ["a", "x"], AS_OF)["rows"]
    assert [(r["jurisdiction"], r["accounts"]) for r in rows] == [("US-CA", 1), ("unknown", 1)]


def _pdf_pages(html: Path, pdf: Path) -> int:
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        pytest.skip("no Chromium to print with")
    subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-pdf-header-footer",
         f"--user-data-dir={pdf.parent / 'profile'}", f"--print-to-pdf={pdf}", html.as_uri()],
        capture_output=True, timeout=180, check=True,
    )  # fmt: skip
    return len(re.findall(rb"/Type\s*/Page[^s]", pdf.read_bytes()))


@pytest.mark.slow
def test_printed_forms(sample_out: Path, mapped: dict, tmp_path: Path) -> None:
    """The Art. 33 form prints on 2 to 4 A4 pages; a California notice with a few requests on one page,
    a long one on about a page per 40 listed requests more."""
    assert 2 <= _pdf_pages(sample_out / "edpb_art33.html", tmp_path / "edpb.pdf") <= 4
    listed = _csv(mapped["out"] / "notices" / "requests.csv")
    rows = Counter(r["account_id"] for r in listed if r["role"] != "possibly_exposed")
    biggest = max(rows, key=lambda a: (rows[a], a))
    smallest = min(rows, key=lambda a: (rows[a], a))
    assert rows[smallest] <= 5, "the smallest notice lists a handful of requests"
    assert _pdf_pages(mapped["out"] / "notices" / f"{smallest}.html", tmp_path / "small.pdf") == 1
    pages = _pdf_pages(mapped["out"] / "notices" / f"{biggest}.html", tmp_path / "big.pdf")
    assert 1 <= pages <= 1 + -(-rows[biggest] // 40), (biggest, rows[biggest], pages)


def test_verify_checks_the_operators_files(mapped: dict) -> None:
    """The operator's rules and accounts file are inputs of the run: the manifest hashes them as read, and
    `forensics verify` names the one that changes."""
    from forensics.custody.checks import verify

    assert not verify(mapped["out"]).failures
    accounts = mapped["bundle"] / "accounts.csv"
    kept = accounts.read_bytes()
    try:
        accounts.write_bytes(kept + b"\n")
        failures = verify(mapped["out"]).failures
        assert failures == [f"{accounts}: changed (SHA-256 differs from the manifest's)"]
    finally:
        accounts.write_bytes(kept)
