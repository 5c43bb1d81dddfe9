"""Report stage, per-account notices: for every customer account to notify, one file per template (by
default an HTML letter to print or attach, and a plain-text one for an e-mail body), plus two files for
mail merge: notices/mail_merge.csv (one row per account: its notice files, counts, dates, what to tell
it, its request ids) and notices/requests.csv (one row per account, role and request: every request id,
the possible ones included).

The notices read only incident.duckdb (the tables notice_requests and notice_incident, and the
notifications query), so `forensics notices OUT --template FILE` renders them again from an edited
template without rerunning the analysis. Templates are Jinja2, rendered in a sandbox (an edited
template cannot reach Python) with every undefined name an error; values from the logs are escaped in
HTML and stripped of control characters in text. docs/notices.md lists what a template is given.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections import defaultdict
from collections.abc import Collection, Iterable, Iterator, Sequence
from datetime import datetime
from itertools import groupby
from operator import itemgetter
from pathlib import Path
from typing import Any

import duckdb
import jinja2
from jinja2.sandbox import SandboxedEnvironment
from markupsafe import Markup

from forensics.custody import rewrite_manifest
from forensics.db import iter_rows, query_rows, run_query, session
from forensics.errors import InputError
from forensics.intake import sha256_file
from forensics.outputs import private_open, recover, scratch_path, swap_in, write_csv
from forensics.paths import TEMPLATES
from forensics.report.disclosure import ROLES, notification_rows
from forensics.report.evidence import Cited, cited_ids
from forensics.report.mail_merge import merge_row, write_merge
from forensics.report.render import f_num, f_plain, f_ts

NOTICES = "notices"  # the folder in --out
DEFAULT_TEMPLATES = (TEMPLATES / "notices" / "notice.html.j2", TEMPLATES / "notices" / "notice.txt.j2")
# bundled templates chosen by name (--notice-template california): California's Notice of Data Breach
BUNDLED = {"california": TEMPLATES / "notices" / "california.html.j2"}
SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")
# the rows of the accounts in $only: a semi join on a hash of them (list_contains tests every row against
# the whole list: 10,000 accounts of 1M rows)
ONLY = "account_id IN (SELECT unnest($only))"
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def notice_stems(account_ids: Iterable[str]) -> dict[str, str]:
    """A file name (without extension) per account id, safe on every file system: the id itself where
    it is made of letters, digits, '.', '_' and '-' only and no other id shares it ignoring case; else
    its safe characters and 8 hex digits of its SHA-256 (ids are hostile text: '../x' stays inside)."""
    ids = sorted(set(account_ids))
    folded = defaultdict(list)
    for a in ids:
        folded[SAFE_NAME.sub("_", a).lower()[:80]].append(a)
    out = {}
    for a in ids:
        safe = SAFE_NAME.sub("_", a)[:80].lstrip(".") or "account"
        clash = len(folded[SAFE_NAME.sub("_", a).lower()[:80]]) > 1
        out[a] = safe if safe == a and not clash else f"{safe}-{hashlib.sha256(a.encode()).hexdigest()[:8]}"
    return out


def _text(value: Any) -> Any:
    """finalize for every notice: log fields lose control characters (terminal escapes, and bidi
    overrides that would show an id reversed in a browser too); HTML escaping then applies as usual.
    What a template marks safe itself (Markup) is its own text and stays as it is."""
    if value is None:
        return ""
    if isinstance(value, Markup):
        return value
    return CONTROL.sub("?", value) if isinstance(value, str) else value


# the templates compiled once per process, each keyed by its file and its text as the loader read them
# (an edited template is compiled anew, whatever its time stamp); a template it includes is loaded by its
# environment, again when that file changes. Compiling the two default notices cost a twentieth of a
# small run; tests run many in one process.
_COMPILED: dict[tuple[str, str], jinja2.Template] = {}


def _environment(template: Path) -> tuple[jinja2.Template, str]:
    """The template, compiled in a sandbox, and the extension of what it renders (notice.html.j2: .html)."""
    name = template.name.removesuffix(".j2")
    ext = Path(name).suffix or ".txt"
    html = ext in (".html", ".htm")
    loader = jinja2.FileSystemLoader(str(template.parent))
    env = SandboxedEnvironment(
        loader=loader,
        autoescape=html,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=_text,
    )
    env.filters.update(ts=f_ts, num=f_num)
    try:
        source, filename, uptodate = loader.get_source(env, template.name)
        key = (str(filename), source)
        if key not in _COMPILED:
            if len(_COMPILED) >= 32:  # an operator's edits in one process (tests): the latest few kept
                _COMPILED.clear()
            code = env.compile(source, template.name, filename)
            _COMPILED[key] = env.template_class.from_code(env, code, env.make_globals(None), uptodate)
        return _COMPILED[key], ext
    except jinja2.TemplateSyntaxError as e:  # the file is the one that failed, maybe one it includes
        raise InputError(f"notice template {e.filename or template}: line {e.lineno}: {e.message}") from None
    except (jinja2.TemplateNotFound, OSError) as e:
        raise InputError(f"notice template {template}: cannot be read ({e})") from None


def check_notice_templates(templates: Sequence[Path] | None) -> None:
    """Every notice template compiles, and no two render the same kind of file: checked before the
    analysis starts, so that an edited template's typo costs seconds, not a whole run."""
    if templates:
        _compiled(templates)


def bundled(template: Path) -> Path:
    """A bundled template's file for its bare name (BUNDLED), where no file of that name is meant."""
    name = str(template)
    return BUNDLED[name] if name in BUNDLED and not template.exists() else template


Compiled = list[tuple[jinja2.Template, str]]


def compiled_templates(templates: Sequence[Path]) -> Compiled:
    """The templates (bundled names allowed) compiled, each with the kind of file it renders."""
    return _compiled(templates)


def _compiled(templates: Sequence[Path]) -> Compiled:
    templates = [bundled(t) for t in templates]
    for t in templates:
        if not t.is_file():
            raise InputError(f"notice template {t}: no such file")
    compiled = [_environment(t) for t in templates]
    exts = [ext for _, ext in compiled]
    if len(set(exts)) < len(exts):
        raise InputError(f"notice templates: two render the same kind of file ({', '.join(sorted(exts))})")
    return compiled


def render_notices(out: Path, templates: Sequence[Path] | None = None, key: Any = None) -> tuple[dict[str, int], str]:
    """`forensics notices OUT`: the notices again, from OUT/incident.duckdb alone (read-only), with the
    operator's templates; the analysis is not rerun. OUT/notices is replaced whole once every notice is
    rendered (a template that fails leaves it as it was), and the manifest's hashes of its files follow;
    nothing else in OUT changes. The manifest changes as a link of its chain (forensics.custody): the one
    it replaces is kept in custody/, and the signature is made again with `key` or removed. Returns the
    counts and what became of the signature."""
    db = out / "incident.duckdb"
    if not db.is_file():
        raise InputError(f"{out}: no incident.duckdb (expected the --out folder of forensics investigate)")
    compiled = _compiled(templates or DEFAULT_TEMPLATES)
    try:
        con = duckdb.connect(str(db), read_only=True)
    except duckdb.Error as err:
        raise InputError(f"{db}: not readable ({str(err).splitlines()[0]})") from None
    try:
        session(con)
        tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        if not {"notice_requests", "notice_incident"} <= tables:
            raise InputError(f"{db}: made by a version without notices (no notice_requests): rerun investigate")
        recover(out / NOTICES)
        counts = _swapped(con, out, compiled)
    finally:
        con.close()
    return counts, _rehash_manifest(out, key)


def _rehash_manifest(out: Path, key: Any) -> str:
    """The manifest's run.outputs_sha256 describes the files in OUT: its notices/ entries are those of
    the notices just rendered (the rest of OUT is unchanged)."""
    try:
        hashes = json.loads((out / "manifest.json").read_text())["run"]["outputs_sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return "none (no manifest of a finished run: nothing claims the notices' bytes)"
    prefix = f"{NOTICES}/"
    kept = {k: v for k, v in hashes.items() if not k.startswith(prefix)}
    folder = out / NOTICES
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        kept[f.relative_to(out).as_posix()] = sha256_file(f)[0]

    def change(manifest: dict[str, Any]) -> None:
        manifest["run"]["outputs_sha256"] = dict(sorted(kept.items()))

    return rewrite_manifest(out, change, key)


def store_incident(con: duckdb.DuckDBPyConnection, ctx: dict[str, Any], disclosure: dict[str, Any]) -> None:
    """notice_incident: what every notice says of the incident (id, title, contact, dates, advice), from
    the report's data and bundle.toml's [disclosure], kept in incident.duckdb as JSON so that the notices
    render again from the database alone."""
    h, k, t = ctx["header"], ctx["clocks"], ctx["totals"]
    incident = {
        "id": h["incident_id"],
        "title": h["title"],
        "report_version": h["report_version"],
        "report_phase": h["report_phase"],
        "as_of": h["as_of"],
        "contact": ctx["contact"],
        "first_customer_at": k["first_customer_at"],
        "first_customer_confirmed_at": k["first_customer_confirmed_at"],
        "indeterminate_reliability": ctx["reliability"]["all"],
        "last_customer_at": k["last_customer_at"],
        "discovered_at": k["discovered_at"],
        "advice": str(disclosure.get("advice", "")),
        "measures": "; ".join(f"{k}: {f_plain(v)}" for k, v in ctx["remediation"].items()),
        "likely_printed": bool(t.get("likely_printed")),
        "likely_reason": t.get("likely_reason") or "",
    }
    run_query(con, "report", "notice_incident", context=json.dumps(incident, default=_json_default, sort_keys=True))


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return {"__ts__": value.isoformat()}
    raise TypeError(type(value).__name__)


def _json_hook(obj: dict[str, Any]) -> Any:
    return datetime.fromisoformat(obj["__ts__"]) if set(obj) == {"__ts__"} else obj


def write_notices(con: duckdb.DuckDBPyConnection, out: Path, templates: Sequence[Path] | None = None) -> dict[str, int]:
    """Render every customer account's notices into out/notices/ (replacing what a previous rendering
    left there); returns the files written per kind. Needs notice_requests and notice_incident."""
    return _swapped(con, out, _compiled(templates or DEFAULT_TEMPLATES))


def _swapped(con: duckdb.DuckDBPyConnection, out: Path, compiled: Compiled) -> dict[str, int]:
    """The notices rendered into a folder beside out/notices, swapped in when all are written."""
    folder = out / NOTICES
    staging = scratch_path(folder, "staging")
    staging.mkdir(mode=0o700)
    try:
        counts = _write(con, staging, compiled, evidence=cited_ids(con))
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    swap_in(staging, folder)
    return counts


def _template_error(template: jinja2.Template, err: Exception) -> InputError:
    """An error while rendering, as one line naming the template file and line: jinja2 puts the template's
    own frames (their globals hold __jinja_exception__) in the traceback, the innermost is where it failed
    (the file may be one the template includes)."""
    where, line = template.filename, None
    tb = err.__traceback__
    while tb is not None:
        if "__jinja_exception__" in tb.tb_frame.f_globals:
            where, line = tb.tb_frame.f_code.co_filename, tb.tb_lineno
        tb = tb.tb_next
    what = str(err) if isinstance(err, jinja2.TemplateError) else f"{type(err).__name__}: {err}"
    return InputError(f"notice template {where}: " + (f"line {line}: " if line else "") + what)


def write_notice_folder(
    con: duckdb.DuckDBPyConnection,
    folder: Path,
    compiled: Compiled,
    *,
    only: Collection[str] | None = None,
    evidence: Cited | None = None,
) -> dict[str, int]:
    """The notices of every account to notify (or of the accounts in `only`) into the new folder `folder`,
    each request line with the ids of its findings rows (`evidence`, forensics.report.evidence)."""
    folder.mkdir(mode=0o700)
    return _write(con, folder, compiled, only=only, evidence=evidence)


def _write(
    con: duckdb.DuckDBPyConnection,
    folder: Path,
    compiled: Compiled,
    *,
    only: Collection[str] | None = None,
    evidence: Cited | None = None,
) -> dict[str, int]:
    row = con.execute("SELECT context FROM notice_incident").fetchone()
    incident = json.loads(row[0], object_hook=_json_hook) if row else {}
    rows = query_rows(con, "report", "notifications")  # ordered by account_id
    if only is not None:  # chosen before their roles are worded: a jurisdiction's few of 100,000 accounts
        rows = [n for n in rows if n["account_id"] in only]
    accounts = notification_rows(rows)
    cites = evidence or {}
    stems = notice_stems(a["account_id"] for a in accounts)
    merge = []
    # no query on `con` until the loop ends: it would close the stream of notice_requests
    for a, requests in _with_requests(accounts, _requests_by_account(con, only=only)):
        for role, rows in requests.items():
            for r in rows:
                r["finding_ids"] = cites.get((role, r["request_id"]), [])
        stem = stems[a["account_id"]]
        ctx = {"incident": incident, "account": a, "requests": requests, "notice_name": stem}
        files = []
        for template, ext in compiled:
            try:
                text = template.render(**ctx)
            except Exception as e:  # an edited template naming what is not there, or failing on a value
                raise _template_error(template, e) from None
            with private_open(folder / f"{stem}{ext}") as fh:
                fh.write(text)
            files.append(f"{stem}{ext}")
        merge.append(merge_row(a, requests, files))
    write_merge(folder / "mail_merge.csv", merge)
    chosen = "" if only is None else f"WHERE {ONLY}"
    n = write_csv(
        con,
        f"""SELECT account_id, role, request_id, status, same_account_only, first_at, last_at, request_at, node,
                  recipient_cohorts FROM notice_requests {chosen} ORDER BY account_id, role, request_id""",
        folder / "requests.csv",
        None if only is None else {"only": sorted(only)},
    )
    return {"notices": len(accounts) * len(compiled), "mail_merge.csv": len(merge), "requests.csv": n}


Requests = dict[str, list[dict[str, Any]]]  # role -> the account's notice_requests rows of that role


def _no_requests() -> Requests:
    return {role: [] for role in ROLES}


def _requests_by_account(
    con: duckdb.DuckDBPyConnection, chunk: int = 10_000, only: Collection[str] | None = None
) -> Iterator[tuple[str, Requests]]:
    """notice_requests one account at a time, in account_id order, streamed: memory holds one account's
    rows, not the run's (logs only, 10M requests make millions of possibly exposed rows: read whole, as
    Python dicts, gigabytes). With `only`, those accounts' rows alone."""
    where, params = ("", None) if only is None else (f"WHERE {ONLY}", {"only": sorted(only)})
    sql = f"SELECT * FROM notice_requests {where} ORDER BY account_id, role, request_id"
    rows = iter_rows(con, sql, params, chunk=chunk)
    for account, group in groupby(rows, key=itemgetter("account_id")):
        requests = _no_requests()
        for r in group:
            requests[r["role"]].append(r)
        yield account, requests


def _with_requests(
    accounts: list[dict[str, Any]], groups: Iterator[tuple[str, Requests]]
) -> Iterator[tuple[dict[str, Any], Requests]]:
    """Each account to notify with its requests: a merge of two streams in account_id order (DuckDB
    orders VARCHAR by bytes, which for UTF-8 is Python's order of code points). A group no account takes
    is passed over, as the lookup by account this replaces left it; an account with no group gets none."""
    pending = next(groups, None)
    for a in accounts:
        key = a["account_id"]
        while pending is not None and key is not None and pending[0] < key:
            pending = next(groups, None)
        if pending is not None and pending[0] == key:
            yield a, pending[1]
            pending = next(groups, None)
        else:
            yield a, _no_requests()
