"""`forensics verify OUT` and `forensics keygen PREFIX`: the chain of custody of an investigate output
folder (forensics.custody)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from forensics.cli.app import app

EPILOG = """Examples:

  forensics keygen ~/keys/dpo                       (writes ~/keys/dpo.key, owner-only, and ~/keys/dpo.pub)

  forensics investigate BUNDLE --out out/ --sign-key ~/keys/dpo.key

  forensics verify out/ --key ~/keys/dpo.pub        (exit 0: every hash, the chain and the signature hold)

verify recomputes the SHA-256 of every input (in the bundle folder the manifest names, or --bundle) and
every output the manifest lists, checks that every finding id a notice cites is in the pack's evidence.csv
and that its evidence lines are lines of the inputs, walks custody/ (the manifests this folder held before), and checks
manifest.sig. Each failure names its file; the exit code is 1 if any fails."""


@app.command("verify", epilog=EPILOG)
def verify(
    out: Annotated[Path, typer.Argument(help="Output folder of forensics investigate.")],
    bundle: Annotated[
        Path | None, typer.Option("--bundle", help="The evidence bundle, if it moved since the run.")
    ] = None,
    key: Annotated[
        Path | None, typer.Option("--key", help="The public key (PEM) that must have signed the manifest.")
    ] = None,
) -> None:
    """Check an output folder against its manifest: inputs, outputs, the chain of manifests, the signature."""
    from forensics.custody.checks import verify as check

    v = check(out, bundle, key)
    for line in v.failures:
        typer.echo(f"FAIL {line}")
    for line in v.notes:
        typer.echo(f"note {line}")
    c = v.checked
    typer.echo(
        f"{'verified' if v.ok else 'NOT verified'}: {c['inputs']:,} inputs, {c['outputs']:,} outputs, "
        f"{c['chain']:,} earlier manifests in the chain, {c['citations']:,} finding ids the notices cite; "
        # a signature that does not hold is a failure above; with none, the run was not signed
        + (f"signed by key {v.signer}" if v.signer else "unsigned" if v.ok else "no signature verified")
        + ("" if v.ok else f"; {len(v.failures):,} failures")
    )
    if not v.ok:
        raise typer.Exit(1)


@app.command("keygen")
def keygen(
    prefix: Annotated[Path, typer.Argument(help="Writes PREFIX.key (private, owner-only) and PREFIX.pub.")],
) -> None:
    """Make an Ed25519 key pair for --sign-key (investigate, notices) and verify --key."""
    from forensics.custody import key_id
    from forensics.custody import keygen as make

    private, public = make(prefix)
    typer.echo(f"{private} (keep it private), {public}: key {key_id(public.read_text())}")
