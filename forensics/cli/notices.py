"""`forensics notices OUT [--template FILE]...`: the per-account notices rendered again from an
investigate output folder's incident.duckdb, with the operator's own templates (forensics.report.notices)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from forensics.cli.app import app

EPILOG = """Examples:

  forensics notices out/                                   (the default HTML and text notices again)

  forensics notices out/ --template letter.html.j2 --template email.txt.j2

Templates are Jinja2, rendered in a sandbox; docs/notices.md lists what a template is given. A template's
name without .j2 gives the kind of file it renders (letter.html.j2: <account>.html)."""


@app.command("notices", epilog=EPILOG)
def notices(
    out: Annotated[Path, typer.Argument(help="Output folder of forensics investigate.")],
    template: Annotated[
        list[Path] | None,
        typer.Option(
            "--template",
            help="A notice template (repeatable); default: the bundled HTML and text ones; `california`: the "
            "bundled California Notice of Data Breach.",
        ),
    ] = None,
    sign_key: Annotated[
        Path | None,
        typer.Option("--sign-key", help="Sign the rewritten manifest with this Ed25519 key (default: $KVF_SIGN_KEY)."),
    ] = None,
) -> None:
    """Render the per-account notices again (OUT/notices/) from the database, without rerunning the analysis."""
    from forensics.custody import signing_key
    from forensics.report.notices import NOTICES, render_notices

    counts, signature = render_notices(out, template or None, key=signing_key(sign_key))
    typer.echo(
        f"notices: {counts['mail_merge.csv']:,} accounts, {counts['notices']:,} notice files, "
        f"{counts['requests.csv']:,} request rows in {out / NOTICES}/; manifest: {signature}"
    )
