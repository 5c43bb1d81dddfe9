"""Run `forensics investigate` on a damaged copy of a simulated incident and measure #47's five properties
against the simulator's truth (truth/responses.csv, truth/exposures.csv, as tests.support.truthcheck
reads them):

1. false_confirmed: responses listed as confirmed that the truth calls unexposed;
2. exposed_missing: truly exposed responses not in affected_responses, found by request id (the spec's,
   or the format's own: truth/gateway_ids.csv), engine rid or room;
3. pairs_missing: true (recipient, source) pairs in neither exposures nor possible_sources (each end
   found the same way);
4. unnamed: the damaged input's path (relative to the bundle) missing from the command's stdout or from
   report.md before part 1's first section ("## 1."); an outage is named by its node's folder
   (engine/<node>, so naming either of its files counts); an input the tool cannot know by name (a file
   never delivered) must have a row of its source in evidence_damage.csv instead. A damage that took
   nothing the analysis reads (a field renamed that no record set, a column another field repeats) may go
   unnamed only when the findings CSVs are byte-identical to the undamaged run's;
5. differing: for duplicates and reordering, the findings CSVs not byte-identical to the undamaged run's.

A run may also refuse: when the damaged input was the bundle's only gateway log and is unreadable or
matches no format, the contract (docs/evidence-bundle.md section 6) says the run stops. That refusal
states no finding, so it can state nothing false; it is sound (Figures.refused, and the five properties
are not measured) only when it is what the CLI's boundary makes of an InputError (exit code 2), its
message is one line naming the file and, where the damage removed a field, that field by name, and
nothing was written to --out. Any other failure, and any refusal while another gateway log was there
to read, is a failure of the run.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from tests.support import open_db
from tests.support.damage import Damage, apply

# where the damage itself is accounted: these may differ from the undamaged run's
DAMAGE_OUTPUTS = {"rejected.csv", "evidence_damage.csv"}


@dataclass(frozen=True)
class Incident:
    name: str
    seed: int
    page_size: int
    gateway_format: str = "kvf"
    no_telemetry: str | None = None
    requests: int = 600

    def config(self):  # noqa: ANN201 (a SimConfig)
        from forensics.simulate import build_config

        return build_config("default", seed=self.seed, requests=self.requests, page_size=self.page_size,
                            gateway_format=self.gateway_format, no_telemetry=self.no_telemetry)  # fmt: skip


@dataclass
class Run:
    out: Path
    exit_code: int
    stdout: str
    error: str | None = None
    message: str | None = None  # the one line the CLI prints for a ForensicsError ("Error: ...")


@dataclass
class Figures:
    damage: Damage
    exposed_total: int
    pairs_total: int
    false_confirmed: list[str] = field(default_factory=list)
    exposed_missing: list[str] = field(default_factory=list)
    pairs_missing: list[tuple[str, str]] = field(default_factory=list)
    unnamed: list[str] = field(default_factory=list)  # where the input's name is missing: "stdout", "part 1"
    differing: list[str] | None = None  # None: the kind loses records, its findings may differ
    error: str | None = None
    refused: str | None = None  # a sound refusal's message (see the module's doc): nothing stated, nothing measured

    def failures(self) -> list[str]:
        out = []
        if self.error:
            out.append(f"the run failed: {self.error}")
        if self.false_confirmed:
            out.append(f"{len(self.false_confirmed)} confirmed responses the truth calls unexposed: "
                       f"{self.false_confirmed[:5]}")  # fmt: skip
        if self.exposed_missing:
            out.append(f"{len(self.exposed_missing)} of {self.exposed_total} truly exposed responses not listed: "
                       f"{self.exposed_missing[:5]}")  # fmt: skip
        if self.pairs_missing:
            out.append(f"{len(self.pairs_missing)} of {self.pairs_total} true pairs in neither exposures nor "
                       f"possible_sources: {self.pairs_missing[:3]}")  # fmt: skip
        if self.unnamed:
            out.append(f"{self.damage.input} not named in {' and '.join(self.unnamed)}")
        if self.differing:
            out.append(f"findings differ from the undamaged run's: {self.differing}")
        return out


def simulated(incident: Incident, root: Path) -> Path:
    """The incident simulated under root/<name> (once: reused when there)."""
    from forensics.simulate import simulate

    out = root / incident.name
    if not (out / "truth" / "responses.csv").exists():
        shutil.rmtree(out, ignore_errors=True)
        simulate(out, incident.config())
    return out


def investigate(bundle: Path, out: Path) -> Run:
    """The CLI's investigate, in this process (its stdout is what a user reads)."""
    from typer.testing import CliRunner

    from forensics.cli import app

    shutil.rmtree(out, ignore_errors=True)
    from forensics.errors import ForensicsError

    res = CliRunner().invoke(app, ["investigate", str(bundle), "--out", str(out), "--quiet", "--workers", "1"])
    code, message = res.exit_code, None
    if isinstance(res.exception, ForensicsError):  # what forensics.cli.main's boundary prints and exits with
        code, message = res.exception.exit_code, f"Error: {res.exception}"
    error = None
    if code != 0:
        error = f"exit {code}: {type(res.exception).__name__}: {res.exception}"
    return Run(out, code, res.stdout, error, message)


def _csv(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


class Truth:
    """The simulator's truth of an incident, each response known by every name the tool may list it under."""

    def __init__(self, sim: Path):
        self.responses = _csv(sim / "truth" / "responses.csv")
        self.pairs = sorted({(r["recipient_request_id"], r["source_request_id"])
                             for r in _csv(sim / "truth" / "exposures.csv")})  # fmt: skip
        own = {r["spec_request_id"]: r["format_request_id"] for r in _csv(sim / "truth" / "gateway_ids.csv")}
        rid = _rids(sim / "bundle")
        self.names: dict[str, set[str]] = {}
        for r in self.responses:
            names = {f"id:{r['request_id']}", f"room:{r['room']}"}
            for other in (own.get(r["request_id"]), rid.get(r["room"])):
                if other:
                    names.add(f"id:{other}")
            self.names[r["request_id"]] = names
        self.by_name = {n: rid_ for rid_, names in self.names.items() for n in names}
        self.exposed = sorted(r["request_id"] for r in self.responses if r["exposed"] == "1")
        self.unexposed = {r["request_id"] for r in self.responses if r["exposed"] != "1"}


def _rids(bundle: Path) -> dict[str, str]:
    """room -> engine rid, from the undamaged engine request logs (the truth does not carry the rid)."""
    out: dict[str, str] = {}
    for p in sorted((bundle / "engine").rglob("requests.jsonl")):
        for line in p.read_text().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            room = (rec.get("obj") or {}).get("bootstrap_room")
            if rec.get("rid") and room is not None:
                out[str(room)] = rec["rid"]
    return out


def _names(request_id: object, room: object) -> set[str]:
    out = set()
    if request_id not in (None, ""):
        out.add(f"id:{request_id}")
    if room not in (None, ""):
        out.add(f"room:{room}")
    return out


_MD_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|<>~])")


def part1(out: Path) -> str:
    """report.md before its first numbered section, Markdown escapes undone."""
    path = out / "report.md"
    text = path.read_text() if path.exists() else ""
    return _MD_ESCAPE.sub(r"\1", text.split("\n## 1.", 1)[0])


# outputs that cite a gateway record by its place in its file (file, row): a reordered file moves the
# place, not the finding, so they are compared without the row and in sorted order
LOCATED_OUTPUTS = {"gateway_join.csv"}


def findings_files(out: Path) -> dict[str, bytes]:
    files = {p.name: p.read_bytes() for p in sorted(out.glob("*.csv")) if p.name not in DAMAGE_OUTPUTS}
    for name in LOCATED_OUTPUTS & files.keys():
        rows = list(csv.reader(io.StringIO(files[name].decode())))
        keep = [i for i, col in enumerate(rows[0]) if col != "row"] if rows else []
        files[name] = "\n".join(sorted(",".join(r[i] for i in keep) for r in rows[1:])).encode()
    return files


def sound_refusal(damage: Damage, run: Run, bundle: Path | None) -> bool:
    """The run refused as the contract allows (see the module's doc): exit code 2 from an InputError, a
    one-line message naming the damaged file and the field the damage removed, nothing written to --out,
    and the damaged file the bundle's only gateway log (`bundle`: the damaged copy)."""
    from forensics.errors import InputError

    if run.exit_code != InputError.exit_code or run.message is None or "\n" in run.message.strip():
        return False
    field = re.match(r"field (\S+) ", damage.detail) if damage.kind == "column_dropped" else None
    named = damage.input in run.message and (field is None or field[1] in run.message)
    only = bundle is not None and [p.relative_to(bundle).as_posix() for p in (bundle / "gateway").iterdir()] == [
        damage.input
    ]
    return named and only and not (run.out.exists() and any(run.out.iterdir()))


def measure(truth: Truth, damage: Damage, run: Run, clean: Run | None, bundle: Path | None = None) -> Figures:
    f = Figures(damage, exposed_total=len(truth.exposed), pairs_total=len(truth.pairs), error=run.error)
    if run.exit_code != 0 and sound_refusal(damage, run, bundle):
        f.error, f.refused = None, run.message
        return f
    listed: dict[str, str] = {}  # truth request id -> status
    found: set[tuple[str, str]] = set()
    db = run.out / "incident.duckdb"
    if run.exit_code == 0 and db.exists():
        con = open_db(db)
        try:
            for rid, room, status in con.execute("SELECT request_id, room, status FROM affected_responses").fetchall():
                matched = {truth.by_name[n] for n in _names(rid, room) if n in truth.by_name}
                for t in matched:
                    listed[t] = status if listed.get(t) != "confirmed" else "confirmed"
                if status == "confirmed" and (not matched or matched <= truth.unexposed):
                    f.false_confirmed.append(str(rid or f"room {room}"))
            q = "SELECT recipient_request_id, recipient_room, source_request_id, source_room FROM {}"
            for table in ("exposures", "possible_sources"):
                for r_id, r_room, s_id, s_room in con.execute(q.format(table)).fetchall():
                    rs = {truth.by_name[n] for n in _names(r_id, r_room) if n in truth.by_name}
                    ss = {truth.by_name[n] for n in _names(s_id, s_room) if n in truth.by_name}
                    found.update((a, b) for a in rs for b in ss)
        finally:
            con.close()
    f.exposed_missing = [r for r in truth.exposed if r not in listed]
    f.pairs_missing = [p for p in truth.pairs if p not in found]
    f.unnamed = _unnamed(damage, run)
    if (damage.invariant or f.unnamed) and clean is not None:
        a, b = findings_files(clean.out), findings_files(run.out)
        differing = sorted(n for n in set(a) | set(b) if a.get(n) != b.get(n))
        if damage.invariant:
            f.differing = differing
        elif not differing:  # the damage took nothing the analysis reads (a field renamed that no record
            f.unnamed = []  # set, a column whose values another field repeats): the same findings need no word
    return f


def _unnamed(damage: Damage, run: Run) -> list[str]:
    if not damage.named:  # a file never delivered: its shadow, a gap of its source, in evidence_damage.csv
        rows = _csv(run.out / "evidence_damage.csv")
        gap = f"{damage.source}_gap"
        return (
            []
            if any(r.get("source") == damage.source and r.get("kind") == gap for r in rows)
            else ["evidence_damage.csv"]
        )
    where = {"stdout": run.stdout, "part 1": part1(run.out)}
    return [w for w, text in where.items() if damage.input not in text]


def damaged_run(sim: Path, kind: str, seed: int, work: Path, clean: Run | None) -> Figures:
    """A copy of sim's bundle damaged by `kind`, investigated, measured."""
    bundle = work / f"{kind}-bundle"
    shutil.rmtree(bundle, ignore_errors=True)
    shutil.copytree(sim / "bundle", bundle)
    damage = apply(kind, bundle, seed)
    run = investigate(bundle, work / f"{kind}-out")
    return measure(Truth(sim), damage, run, clean, bundle)


# the incidents the suite damages: seeds, page sizes 1 / 16 / 64, with and without page telemetry, each
# gateway format of the registry; FAST run in every test run, the rest are marked slow
FAST = (
    Incident("envoy-s3-p1", seed=3, page_size=1, gateway_format="envoy"),
    Incident("litellm-s7-p64-dark", seed=7, page_size=64, gateway_format="litellm_spendlogs", no_telemetry="decode-1"),
)
SLOW = (
    Incident("kvf-s1-p16", seed=1, page_size=16),
    Incident("kvf-s11-p64-dark", seed=11, page_size=64, no_telemetry="decode-2"),
    Incident("litellm-s5-p16", seed=5, page_size=16, gateway_format="litellm_spendlogs"),
    Incident("envoy-s9-p16-dark", seed=9, page_size=16, gateway_format="envoy", no_telemetry="decode-0"),
    Incident("payload-s4-p1-dark", seed=4, page_size=1, gateway_format="litellm_payload", no_telemetry="decode-1"),
    Incident("smg-s6-p64", seed=6, page_size=64, gateway_format="smg"),
    Incident("otlp-s8-p16", seed=8, page_size=16, gateway_format="otlp"),
)
# the slow incidents in four parts, a test file each (test_fault_injection_slow*.py): every incident of SLOW
# in exactly one part, the parts of about equal cost (an incident with page telemetry costs more)
SLOW_PARTS = (SLOW[0:2], SLOW[2:4], SLOW[4:6], SLOW[6:])
INCIDENTS = {i.name: i for i in (*FAST, *SLOW)}
