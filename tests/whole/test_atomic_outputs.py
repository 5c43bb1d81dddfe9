"""Issue #47, outputs change all at once or not at all: a rerun of investigate into a finished --out that
fails in its report stage, or is stopped by SIGTERM half-way, leaves every previous output byte-identical
(sha256 of every file); the finished run's outputs name no staging folder and its manifest hashes the
files as they are; `forensics notices` with a broken template names the file and line and changes no
notice; --force keeps files that are not ours; what a process killed outright leaves beside an output
is settled by the next run."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from forensics.errors import InputError
from forensics.outputs import atomic_open, recover, scratch_path, swap_in, write_json
from forensics.pipeline import investigate
from forensics.simulate import build_config, simulate


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("atomic")
    simulate(tmp / "sim", build_config("default", seed=21, requests=120))
    return tmp / "sim" / "bundle"


@pytest.fixture(scope="module")
def finished(bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished investigate output folder, never written again: tests copy it."""
    out = tmp_path_factory.mktemp("finished") / "case"
    investigate(bundle, out)
    return out


def hashes(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def scratch_beside(out: Path) -> list[str]:
    """This tool's scratch names beside --out and anywhere inside it."""
    names = [p.name for p in out.parent.iterdir() if ".kvf-" in p.name]
    if out.is_dir():
        names += [p.relative_to(out).as_posix() for p in out.rglob("*") if ".kvf-" in p.name]
    return names


def copy(finished: Path, to: Path) -> Path:
    # cp -p: the same bytes and modes, so that a rerun starts from a finished run's folder
    subprocess.run(["cp", "-rp", str(finished), str(to)], check=True)
    return to


def test_finished_outputs_name_no_staging_folder_and_the_manifest_hashes_them(finished: Path) -> None:
    manifest = json.loads((finished / "manifest.json").read_text())
    on_disk = {k: v for k, v in hashes(finished).items() if k != "manifest.json"}
    assert manifest["run"]["outputs_sha256"] == on_disk
    assert "incident.duckdb" in on_disk and any(k.startswith("notices/") for k in on_disk)
    for name in on_disk:  # the database too: its views and settings hold no path of the staging folder
        assert b"kvf-staging" not in (finished / name).read_bytes(), name
    assert scratch_beside(finished) == []


def test_a_rerun_failing_in_the_report_stage_changes_nothing(
    finished: Path, bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import forensics.report

    out = copy(finished, tmp_path / "case")
    before = hashes(out)

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("injected failure in the report stage")

    monkeypatch.setattr(forensics.report, "render_report", broken)
    with pytest.raises(RuntimeError, match="injected"):
        investigate(bundle, out)
    assert hashes(out) == before
    assert scratch_beside(out) == []


def test_a_rerun_with_an_undefined_name_in_its_notice_template_changes_nothing(
    finished: Path, bundle: Path, tmp_path: Path
) -> None:
    """An undefined name is found only when a notice renders, after the analysis: the run fails naming
    the template's file and line, and the previous outputs stay."""
    out = copy(finished, tmp_path / "case")
    before = hashes(out)
    bad = tmp_path / "bad.txt.j2"
    bad.write_text("Dear {{ account.account_id }},\n\n{{ no_such_name }}\n")
    with pytest.raises(InputError) as err:
        investigate(bundle, out, notice_templates=[bad])
    assert str(err.value).startswith(f"notice template {bad}: line 3: ") and "no_such_name" in str(err.value)
    assert hashes(out) == before
    assert scratch_beside(out) == []


def test_sigterm_mid_rerun_leaves_the_previous_outputs(finished: Path, bundle: Path, tmp_path: Path) -> None:
    out = copy(finished, tmp_path / "case")
    before = hashes(out)
    proc = subprocess.Popen(
        [sys.executable, "-m", "forensics", "investigate", str(bundle), "--out", str(out), "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    staging = out.with_name(f"{out.name}.kvf-staging-{proc.pid}")
    deadline = time.monotonic() + 120
    while not (staging / "incident.duckdb").exists():  # the rerun has begun to write
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the rerun wrote no database in 120 s"
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    assert stderr.strip().splitlines() == [
        f"Error: interrupted by SIGTERM: {out} left as it was (the run builds beside it)"
    ]
    assert hashes(out) == before
    assert scratch_beside(out) == []


def test_force_keeps_files_that_are_not_ours(finished: Path, bundle: Path, tmp_path: Path) -> None:
    out = copy(finished, tmp_path / "case")
    (out / "my notes.txt").write_text("the analyst's own notes\n")
    (out / "drafts").mkdir()
    (out / "drafts" / "letter.docx").write_bytes(b"draft")
    with pytest.raises(InputError, match="not this tool's outputs"):
        investigate(bundle, out)
    investigate(bundle, out, force=True)
    assert (out / "my notes.txt").read_text() == "the analyst's own notes\n"
    assert (out / "drafts" / "letter.docx").read_bytes() == b"draft"
    manifest = json.loads((out / "manifest.json").read_text())
    on_disk = {k: v for k, v in hashes(out).items() if k != "manifest.json"}
    assert manifest["run"]["outputs_sha256"] == on_disk  # the files as they are in --out, ours or not
    # the findings are those of a run into a fresh folder
    for name in ("affected_responses.csv", "exposures.csv", "accounts.csv", "report.md"):
        assert (out / name).read_bytes() == (finished / name).read_bytes(), name
    assert scratch_beside(out) == []


# inside a loop over an account's requests: found on the first account that has any
LOOP = "{% for role, rows in requests.items() %}\n{% for r in rows %}\n{{ r.nothing }}{% endfor %}{% endfor %}"


def notices_cmd(out: Path, *templates: Path) -> subprocess.CompletedProcess[str]:
    args = [a for t in templates for a in ("--template", str(t))]
    return subprocess.run(
        [sys.executable, "-m", "forensics", "notices", str(out), *args], capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        ("Dear {{ account.account_id }},\n\nline three {{ no_such_name }}\n", 3, "'no_such_name' is undefined"),
        (LOOP, 3, ""),
        ("one\ntwo\n{% if %}\n", 3, "Expected an expression"),
        ("{{ account.account_id }}\n{{ 1 / 0 }}\n", 2, "ZeroDivisionError"),
    ],
)
def test_a_broken_notice_template_names_file_and_line_and_changes_no_notice(
    finished: Path, tmp_path: Path, text: str, line: int, says: str
) -> None:
    out = copy(finished, tmp_path / "case")
    before = hashes(out)
    assert sum(k.startswith("notices/") for k in before) > 2
    good = tmp_path / "good.html.j2"
    good.write_text("{{ account.account_id }}\n")
    bad = tmp_path / "bad.txt.j2"
    bad.write_text(text)
    r = notices_cmd(out, good, bad)  # the good template renders first: its files must not land either
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: notice template {bad}: line {line}: "), r.stderr
    assert says in lines[0]
    assert hashes(out) == before
    assert scratch_beside(out) == []


def test_notices_rendered_again_are_swapped_in_and_hashed_in_the_manifest(finished: Path, tmp_path: Path) -> None:
    out = copy(finished, tmp_path / "case")
    own = tmp_path / "letter.md.j2"
    own.write_text("# {{ account.account_id }}\n")
    r = notices_cmd(out, own)
    assert r.returncode == 0, r.stderr
    names = {p.name for p in (out / "notices").iterdir()}
    assert names and all(n.endswith(".md") or n in ("mail_merge.csv", "requests.csv") for n in names)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["run"]["outputs_sha256"] == {k: v for k, v in hashes(out).items() if k != "manifest.json"}
    assert scratch_beside(out) == []


def dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(proc.stdout)


def test_recover_puts_back_what_a_kill_between_the_renames_set_aside(tmp_path: Path) -> None:
    out = tmp_path / "case"
    pid = dead_pid()
    previous = tmp_path / f"case.kvf-previous-{pid}"
    previous.mkdir()
    write_json({"incident": {"id": "X"}}, previous / "manifest.json")
    (tmp_path / f"case.kvf-staging-{pid}").mkdir()  # the run's finished but not yet swapped outputs
    (tmp_path / f"case.kvf-staging-{os.getppid()}").mkdir()  # a live process's: not ours to touch
    done = recover(out)
    assert len(done) == 2 and "restored" in done[0]
    assert json.loads((out / "manifest.json").read_text()) == {"incident": {"id": "X"}}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["case", f"case.kvf-staging-{os.getppid()}"]
    # killed after the swap, before the previous folder was removed: the swap had finished
    previous.mkdir()
    assert recover(out) == [f"{previous}: removed (set aside by a finished run)"]
    assert not previous.exists() and (out / "manifest.json").exists()


def test_swap_in_replaces_a_folder_and_creates_a_new_one(tmp_path: Path) -> None:
    target = tmp_path / "t"
    for content in ("first", "second"):
        staging = scratch_path(target, "staging")
        staging.mkdir()
        (staging / "f").write_text(content)
        swap_in(staging, target)
        assert (target / "f").read_text() == content
        assert sorted(p.name for p in tmp_path.iterdir()) == ["t"]


def test_a_file_written_atomically_is_whole_or_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text("previous\n")
    with pytest.raises(RuntimeError), atomic_open(path) as fh:
        fh.write("half")
        raise RuntimeError("stopped")
    assert path.read_text() == "previous\n"
    with atomic_open(path) as fh:
        fh.write("new\n")
    assert path.read_text() == "new\n"
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events.jsonl"]


def test_a_failed_ingest_keeps_the_previous_database(bundle: Path, tmp_path: Path, monkeypatch) -> None:
    import forensics.pipeline as pipeline

    db = tmp_path / "incident.duckdb"
    pipeline.ingest_bundle(bundle, db)
    before = hashes(tmp_path)

    def broken(*args: object) -> None:
        raise RuntimeError("injected failure before the database is finished")

    monkeypatch.setattr(pipeline, "publish", broken)
    with pytest.raises(RuntimeError, match="injected"):
        pipeline.ingest_bundle(bundle, db)
    assert hashes(tmp_path) == before
    assert [p.name for p in tmp_path.iterdir() if ".kvf-" in p.name] == []
