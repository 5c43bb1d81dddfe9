"""The output folder of an investigation: what may be in it (OUT_NAMES) and the check that refuses another
incident's or foreign files (check_out), the --parquet copies of the findings tables, and the manifest's
custody (who ran the job and how: Custody; the `run` section record_custody writes)."""

from __future__ import annotations

import getpass
import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from forensics import custody as custody_mod
from forensics.db import connect, timed
from forensics.errors import InputError
from forensics.findings import OUTPUTS
from forensics.intake import BundleConfig, sha256_file
from forensics.outputs import is_scratch, write_json, write_parquet
from forensics.report.blast import BLAST_FILES
from forensics.report.render import PARTS as REPORT_PARTS


@dataclass(frozen=True)
class Custody:
    """Who ran the job and how, for the manifest's chain of custody."""

    command: str = field(default_factory=lambda: shlex.join(["forensics", *sys.argv[1:]]))
    # the operator named on the command line, else $KVF_OPERATOR, else the login user
    operator: str = field(
        default_factory=lambda: os.environ.get("KVF_OPERATOR") or os.environ.get("USER") or getpass_user()
    )
    sign_key: Path | None = None  # the operator's Ed25519 key (forensics.custody); None: $KVF_SIGN_KEY, if set


def getpass_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


# every file and folder an investigate run writes into --out (and the scratch names of outputs.SCRATCH,
# which a command killed outright may leave): a folder holding only these is a previous run's output,
# safe to replace
OUT_NAMES = frozenset(
    {*OUTPUTS, *BLAST_FILES, "manifest.json", "incident.duckdb", custody_mod.CUSTODY, custody_mod.SIGNATURE}
    | {f"{part}.{ext}" for part in REPORT_PARTS for ext in ("html", "md")}
    | {"incident.duckdb.wal", "incident.duckdb.tmp", ".kvf-work", "parquet", "notices", "brief.html"}
    | {"pack"}  # forensics pack's folder (forensics.pack.PACK): made from a run's outputs, a rerun replaces it
)


def check_out(out: Path, config: BundleConfig, force: bool = False) -> None:
    """Refuse an --out that holds another incident's outputs, or files that are not ours, unless
    `force`: writing over them would destroy evidence of another investigation."""
    if not out.exists():
        return
    if not out.is_dir():
        raise InputError(f"--out {out}: exists and is not a folder")
    if force:
        return
    entries = sorted(p.name for p in out.iterdir())
    foreign = [n for n in entries if n not in OUT_NAMES and not is_scratch(n)]
    if foreign:
        shown = ", ".join(foreign[:5]) + (" ..." if len(foreign) > 5 else "")
        raise InputError(
            f"--out {out}: holds files that are not this tool's outputs ({shown}); choose an empty or new "
            "folder, or pass --force to write into it anyway"
        )
    previous = _manifest_incident(out / "manifest.json")
    mine = config.incident.get("id")
    if previous is not None and previous != (str(mine) if mine is not None else None):
        raise InputError(
            f"--out {out}: holds the outputs of incident {previous or '(no id)'} (manifest.json), not of "
            f"{mine or '(no id)'}; choose another folder, or pass --force to overwrite them"
        )


def _manifest_incident(path: Path) -> str | None:
    """The incident id a previous run's manifest records ('' when it records none; None: no manifest)."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return ""
    inc = data.get("incident") if isinstance(data, dict) else None
    return str(inc.get("id") or "") if isinstance(inc, dict) else ""


def first_missing(path: Path) -> Path | None:
    """The outermost folder of `path` that does not exist yet (what mkdir(parents=True) creates)."""
    missing = None
    for p in (path, *path.parents):
        if p.exists():
            break
        missing = p
    return missing


# the findings tables --parquet exports (the large ones first): typed copies for other tools
PARQUET_TABLES = ("exposures", "possible_sources", "affected_responses", "accounts", "hazards", "coverage")


def export_parquet(out: Path) -> dict[str, int]:
    folder = out / "parquet"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    con = connect(out / "incident.duckdb")
    try:
        with timed("parquet"):
            return {f"parquet/{t}.parquet": write_parquet(con, t, folder / f"{t}.parquet") for t in PARQUET_TABLES}
    finally:
        con.close()
        shutil.rmtree(out / "incident.duckdb.tmp", ignore_errors=True)


def record_custody(
    out: Path, custody: Custody, started: datetime, bundle: Path, exclusions: Path | None, previous: Path
) -> None:
    """The manifest's `run` section: the command, the operator, when, the bundle folder, the manifest
    `previous` (the --out being replaced) held, kept in custody/ (the chain), and the SHA-256 of every
    output as written. The rest of the manifest is a function of the evidence (byte-identical run after
    run); this section is not, and says so by its place."""
    path = out / "manifest.json"
    manifest = json.loads(path.read_text())
    link = custody_mod.keep_previous(previous, out)
    outputs = sorted(p for p in out.rglob("*") if p.is_file() and p.name not in custody_mod.UNLISTED)
    manifest["run"] = {
        "command": custody.command,
        "operator": custody.operator,
        "bundle": str(bundle.resolve()),
        "exclusions": str(exclusions.resolve()) if exclusions else None,
        "previous_manifest": link,
        "started_at": started.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "outputs_sha256": {p.relative_to(out).as_posix(): sha256_file(p)[0] for p in outputs},
    }
    write_json(manifest, path)
