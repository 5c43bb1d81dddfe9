"""`forensics pack OUT`: the compliance pack of a finished investigate output folder, in one command
(issue #51, "time to file"): what goes to the regulator, to the accounts and to the SIEM, in OUT/pack/.

- ``forms/``: the GDPR Art. 33 form (edpb_art33.html, .md) as investigate rendered it from the whole
  report's data (the database alone does not hold that data).
- ``notices/``: every notified account's generic notice (HTML letter, text e-mail), with its evidence
  appendix (forensics.report.evidence), mail_merge.csv and requests.csv; ``notices/<jurisdiction>/``:
  the form a jurisdiction prescribes (JURISDICTION_NOTICES: California's Notice of Data Breach) for the
  accounts the operator's accounts file maps there.
- ``evidence.csv``: every finding id a notice cites, its findings CSV row and the evidence lines behind
  it (forensics.report.evidence).
- ``siem/``: the findings (and a watch alerts file's alerts) in each SIEM format (forensics.siem).

The folder is built beside OUT/pack and swapped in whole (forensics.outputs.swap_in): a pack that fails
half-way leaves the previous one as it was. The manifest then lists the pack's files as one more link
of its chain (forensics.custody.rewrite_manifest), signed again with the operator's key. A process
killed between the swap and the manifest's rewrite leaves a pack the manifest does not list: verify
names its files, and running pack again settles it.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from forensics.custody import MANIFEST, rewrite_manifest
from forensics.db import session
from forensics.errors import InputError
from forensics.intake import load_bundle_config, sha256_file
from forensics.outputs import link_or_copy, private_open, recover, scratch_path, swap_in
from forensics.report.evidence import EVIDENCE_CSV, cited_ids, has_evidence, write_evidence
from forensics.report.notices import BUNDLED, DEFAULT_TEMPLATES, NOTICES, compiled_templates, write_notice_folder
from forensics.siem import FORMATS, events, render

PACK = "pack"  # the folder in OUT
FORMS = ("edpb_art33.html", "edpb_art33.md")
# the notice form a jurisdiction prescribes, by its code in the rules table: a bundled template (BUNDLED)
JURISDICTION_NOTICES = {"US-CA": "california"}
SIEM_FILES = {
    "cef": "findings.cef",
    "hec": "findings.hec.jsonl",
    "ecs": "findings.ecs.jsonl",
    "ocsf": "findings.ocsf.jsonl",
}


@dataclass
class Packed:
    """What `forensics pack` wrote, for the command to say."""

    files: int
    accounts: int
    by_jurisdiction: dict[str, int]
    siem: dict[str, int]
    evidence_rows: int
    signature: str


def _manifest(out: Path) -> dict[str, Any]:
    path = out / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(
            f"{out}: no {MANIFEST} (expected the --out folder of a finished forensics investigate)"
        ) from None
    except (OSError, ValueError) as err:
        raise InputError(f"{path}: not readable JSON ({err})") from None
    if not isinstance((manifest.get("run") or {}).get("outputs_sha256"), dict):
        raise InputError(f"{path}: no output hashes (run.outputs_sha256): not a finished run's manifest")
    return dict(manifest)


def account_places(out: Path, manifest: dict[str, Any], bundle: Path | None) -> dict[str, tuple[str, ...]]:
    """Each account's jurisdictions, from the operator's accounts file that bundle.toml names (read as
    investigate read it): the bundle the manifest names, or `bundle`."""
    folder = bundle or (Path(manifest["run"]["bundle"]) if manifest["run"].get("bundle") else None)
    if folder is None or not folder.is_dir():
        raise InputError(
            f"{out}: the bundle folder {folder or '(none named)'} is not there: pass --bundle (its bundle.toml "
            "maps the accounts to their jurisdictions)"
        )
    mapped = load_bundle_config(folder).disclosure["jurisdictions"]["accounts"]
    return {a: tuple(p.jurisdiction for p in places) for a, places in mapped.items()}


def build_pack(
    out: Path, *, bundle: Path | None = None, alerts: Path | None = None, key: Any = None, command: str = ""
) -> Packed:
    """OUT/pack: forms, notices, evidence index and SIEM exports, swapped in whole; the manifest's chain
    and signature then cover it."""
    manifest = _manifest(out)
    db = out / "incident.duckdb"
    if not db.is_file():
        raise InputError(f"{out}: no incident.duckdb (expected the --out folder of forensics investigate)")
    missing = [f for f in FORMS if not (out / f).is_file()]
    if missing:
        raise InputError(
            f"{out}: no {', '.join(missing)} (made by a version without the Art. 33 form: rerun investigate)"
        )
    places = account_places(out, manifest, bundle)
    forms = {code: compiled_templates([BUNDLED[name]]) for code, name in JURISDICTION_NOTICES.items()}
    evs = list(events(out, alerts))  # every input read and checked before anything is written
    target = out / PACK
    recover(target)
    staging = scratch_path(target, "staging")
    staging.mkdir(mode=0o700)
    try:
        con = duckdb.connect(str(db), read_only=True)
    except duckdb.Error as err:
        shutil.rmtree(staging)
        raise InputError(f"{db}: not readable ({str(err).splitlines()[0]})") from None
    try:
        session(con)
        (staging / "forms").mkdir()
        for name in FORMS:
            shutil.copyfile(out / name, staging / "forms" / name)
        if not has_evidence(con):
            raise InputError(f"{db}: made by a version without finding ids (no finding_evidence): rerun investigate")
        n_evidence = write_evidence(con, staging / EVIDENCE_CSV)
        chosen = {code: {a for a, codes in places.items() if code in codes} for code in forms}
        known = _carry_notices(out, staging / "notices", manifest["run"]["outputs_sha256"])
        if known is None:  # OUT/notices is gone: rendered again, as investigate renders them
            cited = cited_ids(con)
            generic = compiled_templates(DEFAULT_TEMPLATES)
            notices = write_notice_folder(con, staging / NOTICES, generic, evidence=cited)
            known = {}
        else:  # only the jurisdictions' accounts are rendered here: their notice lines' ids alone
            cited = cited_ids(con, only=set().union(*chosen.values()))
            notices = {"mail_merge.csv": _rows(staging / "notices" / "mail_merge.csv")}
        by_place = {}
        for code, compiled in forms.items():
            if chosen[code]:  # no account mapped there: no folder
                n = write_notice_folder(con, staging / "notices" / code, compiled, only=chosen[code], evidence=cited)
                by_place[code] = n["mail_merge.csv"]
        siem = _write_siem(staging / "siem", evs)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        con.close()
    swap_in(staging, target)
    hashes = {}
    # names as strings: sorting 200,000 Path objects costs half a minute of comparisons; each folder's
    # name made once, not once per file (pathlib's parse of 200,000 roots: seconds)
    names = sorted(
        f"{folder}/{name}"
        for root, _, files in os.walk(target)
        for folder in (f"{PACK}/{Path(root).relative_to(target).as_posix()}".removesuffix("/."),)
        for name in files
    )
    for name in names:
        hashes[name] = known.get(name) or sha256_file(out / name)[0]

    def change(m: dict[str, Any]) -> None:
        kept = {k: v for k, v in m["run"]["outputs_sha256"].items() if not k.startswith(f"{PACK}/")}
        m["run"]["outputs_sha256"] = dict(sorted({**kept, **hashes}.items()))
        m["pack"] = {"command": command, "files": len(hashes), "siem": siem, "notices_by_jurisdiction": by_place}

    signature = rewrite_manifest(out, change, key)
    return Packed(len(hashes), notices["mail_merge.csv"], by_place, siem, n_evidence, signature)


def _carry_notices(out: Path, folder: Path, recorded: dict[str, str]) -> dict[str, str] | None:
    """OUT/notices as investigate (or `forensics notices`) rendered them, with the ids of the findings rows
    behind each line, carried into the pack as hard links (copies where the file system has none):
    rendering 100,000 accounts' notices again would cost minutes, for the same bytes. Returns each file's
    SHA-256 as the manifest records it (a file changed since fails verify under both names), or None
    when OUT/notices is not there."""
    src = out / NOTICES
    if not (src / "mail_merge.csv").is_file():
        return None
    known: dict[str, str] = {}
    _link_tree(str(src), str(folder), NOTICES, recorded, known)
    return known


def _link_tree(src: str, dst: str, name: str, recorded: dict[str, str], known: dict[str, str]) -> None:
    """shutil.copytree(src, dst, copy_function=link_or_copy), its paths kept as strings (pathlib's objects
    for 200,000 files cost seconds), each file's recorded hash noted under its name in the pack."""
    os.mkdir(dst)
    with os.scandir(src) as entries:
        for e in sorted(entries, key=lambda e: e.name):
            inner = f"{name}/{e.name}"
            if e.is_dir():  # a link to a folder: its files, as copytree follows it
                _link_tree(e.path, os.path.join(dst, e.name), inner, recorded, known)
                continue
            link_or_copy(e.path, os.path.join(dst, e.name))
            if inner in recorded:
                known[f"{PACK}/{inner}"] = recorded[inner]
    shutil.copystat(src, dst)


def _rows(path: Path) -> int:
    """Data rows of a CSV (a cell may hold a line break: hostile ids are quoted, not cut)."""
    with path.open(encoding="utf-8", newline="") as f:
        return max(sum(1 for _ in csv.reader(f)) - 1, 0)


def _write_siem(folder: Path, evs: list[Any]) -> dict[str, int]:
    """Every event in each format, one file per format; returns the events per source."""
    folder.mkdir()
    for fmt in FORMATS:
        with private_open(folder / SIEM_FILES[fmt]) as fh:
            fh.writelines(render(ev, fmt) + "\n" for ev in evs)
    counts = {"finding": 0, "alert": 0}
    for ev in evs:
        counts[ev.source] += 1
    return counts
