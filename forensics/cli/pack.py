"""`forensics pack OUT`: the compliance pack of an investigate output folder, in one command: the Art. 33
form, the notices (generic, and each jurisdiction's own form), the evidence index and the SIEM exports
in OUT/pack/, listed and signed in the manifest (forensics.pack)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from forensics.cli.app import app, stopped_by_signals

EPILOG = """Examples:

  forensics pack out/ --sign-key ~/keys/dpo.key

  forensics pack out/ --alerts alerts.jsonl --bundle /evidence/INC-2026-0909

  forensics verify out/ --key ~/keys/dpo.pub        (the pack's files are in the manifest it checks)

OUT/pack/: forms/ (edpb_art33.html, .md), notices/ (a letter and an e-mail per account, mail_merge.csv,
requests.csv; notices/US-CA/: California's Notice of Data Breach for the accounts the accounts file maps
there), evidence.csv (each finding id a notice cites, with its evidence lines), siem/ (findings.cef,
findings.hec.jsonl, findings.ecs.jsonl, findings.ocsf.jsonl). The folder is replaced whole; the manifest
keeps its previous version in custody/ and is signed again with the key."""


@app.command("pack", epilog=EPILOG)
def pack(
    out: Annotated[Path, typer.Argument(help="Output folder of forensics investigate.")],
    bundle: Annotated[
        Path | None, typer.Option("--bundle", help="The evidence bundle, if it moved since the run (its bundle.toml).")
    ] = None,
    alerts: Annotated[
        Path | None, typer.Option("--alerts", help="A watch alerts file (JSON lines): SIEM events for them too.")
    ] = None,
    sign_key: Annotated[
        Path | None,
        typer.Option("--sign-key", help="Sign the rewritten manifest with this Ed25519 key (default: $KVF_SIGN_KEY)."),
    ] = None,
) -> None:
    """Build the compliance pack (forms, notices, evidence index, SIEM exports) from a finished investigate."""
    from forensics.custody import signing_key
    from forensics.pack import PACK, build_pack

    started = time.monotonic()
    key = signing_key(sign_key)
    with stopped_by_signals(f"{out / PACK} is as it was"):
        p = build_pack(out, bundle=bundle, alerts=alerts, key=key, command=" ".join(["forensics", *sys.argv[1:]]))
    places = ", ".join(f"{code} {n:,}" for code, n in p.by_jurisdiction.items())
    typer.echo(
        f"pack: {p.files:,} files in {out / PACK}/: {p.accounts:,} accounts' notices "
        f"({places or 'no jurisdiction form'}), "
        f"{p.evidence_rows:,} findings in evidence.csv, {p.siem['finding']:,} findings and {p.siem['alert']:,} alerts "
        f"in 4 SIEM formats; manifest: {p.signature}; {time.monotonic() - started:.1f} s"
    )
