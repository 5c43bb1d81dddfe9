"""Issue #8: hostile and broken input. The run completes where any evidence is usable, every bad row is
in rejected.csv with file, row and reason, every unreadable file is named in manifest.json, rows read =
loaded + rejected for every file, exit codes as documented, never a traceback, outputs safe to open."""

from __future__ import annotations

import csv
import json
import os
import shutil
import stat
import subprocess
import sys
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support import EXAMPLE
from tests.support.analysis import Findings
from tests.support.broken import add_garbage, garbage_cases
from tests.support.bundlekit import Node, engine_log, gw, write_jsonl, write_pages

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "forensics", *args], capture_output=True, text=True, timeout=120)


def cli_many(*arg_lists: list[str]) -> list[subprocess.CompletedProcess[str]]:
    """Several CLI runs at once (each is mostly interpreter start-up): keeps the suite fast."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(lambda a: cli(*a), arg_lists))


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The spec example investigated as is, and with the whole broken corpus beside it (one CLI run each)."""
    tmp = tmp_path_factory.mktemp("hardening")
    bundle = tmp / "bundle"
    shutil.copytree(EXAMPLE / "bundle", bundle)
    cases = add_garbage(bundle)
    garbage, clean = cli_many(
        ["investigate", str(bundle), "--out", str(tmp / "garbage")],
        ["investigate", str(EXAMPLE / "bundle"), "--out", str(tmp / "clean")],
    )
    return {
        "cases": cases,
        "garbage": garbage,
        "clean": clean,
        "out": tmp / "garbage",
        "clean_out": tmp / "clean",
    }


def test_broken_corpus_run_completes_without_traceback(runs: dict) -> None:
    for key in ("garbage", "clean"):
        proc = runs[key]
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    assert "rejected input rows: " in runs["garbage"].stdout


@pytest.mark.parametrize("case", garbage_cases(), ids=lambda c: c.name)
def test_broken_corpus_case(runs: dict, case) -> None:
    out: Path = runs["out"]
    manifest = {e["path"]: e for e in json.loads((out / "manifest.json").read_text())["inputs"]}
    entry = manifest[case.path]
    rejected = {
        (int(r["row"]) if r["row"] else None): r["reason"] for r in _csv(out / "rejected.csv") if r["file"] == case.path
    }
    if case.unreadable:
        assert case.unreadable in entry.get("error", ""), entry
        assert str(out.parent) not in entry["error"]  # errors name the file relative to the bundle
        assert (entry["rows_read"], entry["rows_loaded"], entry["rows_rejected"]) == (0, 0, 0)
        return
    assert "error" not in entry
    assert set(rejected) == set(case.rejected), rejected
    for row, piece in case.rejected.items():
        assert piece in rejected[row], (row, rejected[row])
    assert (entry["rows_read"], entry["rows_loaded"], entry["rows_rejected"]) == (
        case.read,
        case.loaded,
        len(case.rejected),
    )


def test_every_file_accounts_for_every_row(runs: dict) -> None:
    out: Path = runs["out"]
    per_file: dict[str, int] = defaultdict(int)
    for r in _csv(out / "rejected.csv"):
        assert r["file"] and r["reason"]
        per_file[r["file"]] += 1
    inputs = json.loads((out / "manifest.json").read_text())["inputs"]
    assert len(inputs) == len(
        list(
            p
            for p in (EXAMPLE / "bundle").rglob("*")
            if p.is_file() and p.name not in ("bundle.toml", "exclusions.toml")
        )
    ) + len(runs["cases"])
    for e in inputs:
        assert e["rows_read"] == e["rows_loaded"] + e["rows_rejected"], e
        assert per_file[e["path"]] == e["rows_rejected"], e
        assert len(e["sha256"]) == 64
    unreadable = {e["path"] for e in inputs if "error" in e}
    assert unreadable == {c.path for c in runs["cases"] if c.unreadable}


def test_garbage_beside_good_evidence_changes_no_finding(runs: dict) -> None:
    for name in ("affected_responses.csv", "exposures.csv", "hazards.csv", "accounts.csv"):
        assert (runs["out"] / name).read_bytes() == (runs["clean_out"] / name).read_bytes(), name


def test_out_of_order_and_duplicated_events_change_nothing(tmp_path: Path) -> None:
    b = tmp_path / "b"
    shutil.copytree(EXAMPLE / "bundle", b)
    lines = (b / "pages" / "events.jsonl").read_text().splitlines()
    (b / "pages" / "events.jsonl").write_text("\n".join(reversed(lines)) + "\n")
    (b / "pages" / "resent.jsonl").write_text("\n".join(lines[::3]) + "\n")  # a shipper re-sent some events
    base, got = Findings(EXAMPLE / "bundle"), Findings(b)
    assert got.affected() == base.affected()
    assert got.exposures() == base.exposures()
    assert got.hazards() == base.hazards()
    dups = got.rows("SELECT count(*) FROM rejected WHERE reason LIKE 'duplicate event%'")[0][0]
    assert dups == len(lines[::3])


# --- bundles that are unusable as a whole: exit 2 with a one-line message naming the problem -------------


def _no_gateway(b: Path) -> None:
    engine_log(b, "decode-0", "decode", 1024)
    write_pages(b, Node("decode-0").ev("alloc", 1, 0, 16))


def _only_bad_gateway(b: Path) -> None:
    (b / "gateway").mkdir(parents=True)
    (b / "gateway" / "gw.parquet").write_bytes(os.urandom(512))


def _with_file(name: str, text: str):  # noqa: ANN202 (a bundle builder)
    """The example bundle with its file `name` replaced by `text`."""

    def build(b: Path) -> None:
        shutil.copytree(EXAMPLE / "bundle", b)
        (b / name).write_text(text)

    return build


UNUSABLE = {
    "path does not exist": (None, "no such bundle"),
    "empty bundle": (lambda b: b.mkdir(), "no gateway log"),
    "no gateway log": (_no_gateway, "no gateway log"),
    "only gateway log unreadable": (_only_bad_gateway, "no gateway log could be read"),
    "bundle is a file": (lambda b: b.write_text("x"), "not a folder"),
    "exclusions unknown key": (
        _with_file("exclusions.toml", '[[cohort]]\nname = "t"\nkind = "internal"\n[[cohort.match]]\nacounts = ["a"]\n'),
        "'acounts'",
    ),
    "exclusions bad CIDR": (
        _with_file(
            "exclusions.toml",
            '[[cohort]]\nname = "t"\nkind = "internal"\n[[cohort.match]]\nclient_cidrs = ["10.0.0.0/33"]\n',
        ),
        "10.0.0.0/33",
    ),
    "exclusions not TOML": (_with_file("exclusions.toml", "[[cohort]\n"), "not valid TOML"),
    "bundle.toml not TOML": (_with_file("bundle.toml", "[incident\nid = "), "not valid TOML"),
    "bundle.toml engine version": (
        _with_file("bundle.toml", '[engine]\nversion = "latest"\n'),
        "[engine] version 'latest'",
    ),
}


@pytest.fixture(scope="module")
def unusable_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess[str]]:
    args = []
    for i, (build, _) in enumerate(UNUSABLE.values()):
        b = tmp_path_factory.mktemp(f"unusable{i}") / "bundle"
        if build is not None:
            build(b)
        args.append(["investigate", str(b), "--out", str(b.parent / "out")])
    return dict(zip(UNUSABLE, zip(cli_many(*args), [Path(a[-1]) for a in args], strict=True), strict=True))


@pytest.mark.parametrize("name", list(UNUSABLE))
def test_unusable_input_exits_2_with_one_line(unusable_runs: dict, name: str) -> None:
    message = UNUSABLE[name][1]
    proc, out = unusable_runs[name]
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0], proc.stderr
    assert not out.exists()  # the run created --out: it leaves no empty folder behind


def test_missing_exclusions_option_file_and_usage_errors_exit_2(tmp_path: Path) -> None:
    missing, usage = cli_many(
        [
            "investigate",
            str(EXAMPLE / "bundle"),
            "--out",
            str(tmp_path / "o"),
            "--exclusions",
            str(tmp_path / "nope.toml"),
        ],
        ["investigate", "--no-such-option"],
    )
    assert missing.returncode == 2 and "nope.toml" in missing.stderr and "Traceback" not in missing.stderr
    assert usage.returncode == 2 and "Traceback" not in usage.stderr


def test_gateway_only_bundle_is_usable(tmp_path: Path) -> None:
    b = tmp_path / "b"
    write_jsonl(b / "gateway" / "gw.jsonl", [gw("r1", 1), gw("r2", 2)])
    proc = cli("investigate", str(b), "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr


def test_debug_shows_the_trace(tmp_path: Path) -> None:
    proc = cli("--debug", "investigate", str(tmp_path / "missing"), "--out", str(tmp_path / "out"))
    assert proc.returncode != 0 and "Traceback" in proc.stderr


INTERNAL = (
    "import sys, forensics.pipeline as p\n"
    "def boom(*a, **k): raise RuntimeError('simulated bug')\n"
    "p.investigate = boom\nsys.argv = ['forensics'] + sys.argv[1:]\n"
    "from forensics.cli import main\nmain()\n"
)


def test_internal_error_exits_3_without_traceback(tmp_path: Path) -> None:
    args = ["investigate", str(EXAMPLE / "bundle"), "--out", str(tmp_path / "out")]
    proc = subprocess.run(
        [sys.executable, "-c", INTERNAL, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "FORENSICS_DEBUG"},
    )
    assert proc.returncode == 3
    assert "Traceback" not in proc.stderr
    assert "internal error" in proc.stderr and "simulated bug" in proc.stderr and "--debug" in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-c", INTERNAL, "--debug", *args], capture_output=True, text=True, timeout=60
    )
    assert "Traceback" in proc.stderr and "simulated bug" in proc.stderr


# --- output safety: hostile strings in every text field that reaches a report or CSV -------------------

XSS = "<script>alert(1)</script>"
HOSTILE = {
    "request_id": "=1+2" + XSS,
    "account_id": "+acct<img src=x onerror=alert(2)>",
    "api_token_id": "-tok\"'&<b>",
    "user_agent": "@ua\r\n<iframe src=//evil>",
    "model": "\tmodel</td></tr><h1>x</h1>",
    "header": "=cmd|' /C calc'!A0<marquee>",
}
NODE = '=HYPERLINK("x")<u>d'  # a node name is a folder name and a log field: hostile too


def _hostile_bundle(tmp_path: Path) -> Path:
    b = tmp_path / "hostile"
    victim = gw("=SUM(A1)" + XSS, 1, account="@victim<svg onload=alert(3)>", decode=NODE)
    recipient = gw(
        HOSTILE["request_id"],
        2,
        account=HOSTILE["account_id"],
        decode=NODE,
        api_token_id=HOSTILE["api_token_id"],
        user_agent=HOSTILE["user_agent"],
        model=HOSTILE["model"],
        headers={"x-internal-test": HOSTILE["header"]},
    )
    write_jsonl(b / "gateway" / "gw.jsonl", [victim, recipient, "=cmd|' /C calc'!A0 " + XSS])
    engine_log(
        b,
        NODE,
        "decode",
        2048,
        lines=["[2026-08-29 10:00:05 TP0] Req Time Stats(rid=-x" + XSS + ", input len=x)"],
    )
    d = Node(NODE)
    d.ev("alloc", 1, 16, 32).ev("write", 1, 16, 32, src="decode").ev("read", 1, 16, 32).ev("free", 1, 16, 32)
    d.ev("alloc", 2, 16, 32).ev("read", 2, 16, 32).ev("free", 2, 16, 32)
    write_pages(b, d)
    (b / "exclusions.toml").write_text(
        '[[cohort]]\nname = "=evil<b>"\nkind = "other"\n[[cohort.match]]\n'
        'headers = { "x-internal-test" = "=cmd|\' /C calc\'!A0<marquee>" }\n'
    )
    return b


@pytest.fixture(scope="module")
def hostile_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("hostile")
    out = tmp / "out"
    proc = cli("investigate", str(_hostile_bundle(tmp)), "--out", str(out))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return out


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def test_hostile_strings_reach_the_outputs(hostile_out: Path) -> None:
    affected = _csv(hostile_out / "affected_responses.csv")
    assert [r["request_id"] for r in affected] == ["'" + HOSTILE["request_id"]]  # the exposure was found
    assert affected[0]["account_id"] == "'" + HOSTILE["account_id"]
    assert affected[0]["cohort"] == "'=evil<b>"
    assert affected[0]["decode_node"] == "'" + NODE
    reasons = [r["reason"] for r in _csv(hostile_out / "rejected.csv")]
    assert any(XSS in r for r in reasons)  # reasons quote the raw input (safely)


def test_csv_cells_never_start_a_formula(hostile_out: Path) -> None:
    files = sorted(hostile_out.glob("*.csv"))
    assert len(files) >= 8
    for path in files:
        with path.open(newline="", encoding="utf-8") as fh:
            for row in csv.reader(fh):
                for value in row:
                    assert not value.startswith(FORMULA_START) or _is_number(value), (path.name, value)


@pytest.mark.parametrize("part", ["report", "technical_annex"])
def test_reports_escape_every_log_derived_string(hostile_out: Path, part: str) -> None:
    html = (hostile_out / f"{part}.html").read_text(encoding="utf-8")
    md = (hostile_out / f"{part}.md").read_text(encoding="utf-8")
    # inside fenced code blocks markup is shown as text; md_code keeps a fence from being closed early
    blocks = md.split("```")
    assert len(blocks) % 2 == 1
    md = "".join(blocks[::2])
    if part == "report":  # the ids are in the per-account notices (Part 2 counts them) and the brief
        html += "".join(p.read_text(encoding="utf-8") for p in sorted((hostile_out / "notices").glob("*.html")))
        html += (hostile_out / "brief.html").read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # present, as text
    for raw in (XSS, "<img src=x", "<iframe", "<svg onload", "<marquee>", "<h1>x</h1>", "<u>d", "<b>"):
        assert raw not in html, raw
        assert raw not in md, raw


def test_outputs_are_private(hostile_out: Path, runs: dict) -> None:
    for out in (hostile_out, runs["out"]):
        names = {p.name for p in out.iterdir()}
        assert {"incident.duckdb", "report.html", "report.md", "manifest.json", "rejected.csv"} <= names
        for p in out.rglob("*"):  # notices/ too: a folder the owner only may enter, files they only may read
            assert stat.S_IMODE(p.stat().st_mode) == (0o700 if p.is_dir() else 0o600), p


def test_ingest_command_outputs_are_private(tmp_path: Path) -> None:
    proc = cli("ingest", str(EXAMPLE / "bundle"), "--db", str(tmp_path / "i.duckdb"))
    assert proc.returncode == 0, proc.stderr
    for name in ("i.duckdb", "manifest.json"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600, name


def test_debug_comes_from_the_option_not_from_any_argument(tmp_path: Path) -> None:
    """'--debug' as an option's value is not the flag: the error stays one line."""
    proc = cli("simulate", str(tmp_path / "sim"), "--no-telemetry", "--debug", "--gap-node", "nope")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_a_bad_simulator_option_exits_2_with_one_line(tmp_path: Path) -> None:
    proc = cli("simulate", str(tmp_path / "sim"), "--gap-node", "nope")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == ["Error: simulate: --gap-node 'nope' is not a node"]


def test_a_failed_engine_log_audit_is_named_in_the_report(tmp_path: Path, monkeypatch) -> None:
    import forensics.ingest.startup as startup  # where ingest runs the audit (node_audit)
    from forensics.pipeline import investigate

    def boom(*_a, **_k):
        raise OSError("simulated unreadable engine folder")

    monkeypatch.setattr(startup, "audit_engine_dirs", boom)
    investigate(EXAMPLE / "bundle", tmp_path / "out")
    for name in ("technical_annex.md", "technical_annex.html"):
        text = (tmp_path / "out" / name).read_text()
        assert "The engine-log audit failed (OSError: simulated unreadable engine folder)" in text, name
