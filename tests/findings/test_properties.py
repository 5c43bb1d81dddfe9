"""Issue #8, property-based: the ownership rules do not depend on how the page events are laid out in files,
and no exposure is reported without the page events that make it possible.

Bundles come from the simulator (small: each example must stay fast); hypothesis picks the seed, the
permutation and the split points. Bounded: a handful of examples, no deadline.
"""

from __future__ import annotations

import atexit
import json
import random
import shutil
import tempfile
from functools import cache
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.simulate import build_config, simulate
from tests.support.analysis import Findings

SEEDS = (21, 22)
PROPS = settings(
    max_examples=3,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
ROOT = Path(tempfile.mkdtemp(prefix="kvf-props-"))
atexit.register(shutil.rmtree, ROOT, True)


@cache
def sim_bundle(seed: int) -> Path:
    out = ROOT / f"sim{seed}"
    simulate(out, build_config("default", seed=seed, requests=120))
    return out / "bundle"


def summary(f: Findings) -> tuple:
    affected = f.rows("""SELECT request_id, status, evidence, kinds, first_exposed_at, exposed_slots,
                                source_requests,
                                reason FROM affected_responses ORDER BY ALL""")
    return affected, f.exposures(), f.hazards(), f.rows("SELECT * FROM coverage ORDER BY ALL")


@cache
def baseline(seed: int) -> tuple:
    return summary(Findings(sim_bundle(seed)))


def read_rows(path: Path) -> list:
    """A page-event file as rows: Parquet as a table's rows, JSONL as its lines."""
    if path.name.endswith(".parquet"):
        t = pq.read_table(path)
        return [t.slice(i, 1) for i in range(t.num_rows)]
    return path.read_text().splitlines()


def write_rows(path: Path, rows: list) -> None:
    if path.name.endswith(".parquet"):
        pq.write_table(pa.concat_tables(rows), path)
    else:
        path.write_text("".join(r + "\n" for r in rows))


def relaid(seed: int, rnd: random.Random, split: bool) -> Path:
    """A copy of the simulated bundle whose page-event files are shuffled, or split into several files."""
    b = Path(tempfile.mkdtemp(prefix="relaid-", dir=ROOT)) / "bundle"
    shutil.copytree(sim_bundle(seed), b)
    for path in sorted((b / "pages").iterdir()):
        rows = read_rows(path)
        if not split:
            rnd.shuffle(rows)
            write_rows(path, rows)
            continue
        cuts = sorted(rnd.sample(range(1, len(rows)), k=min(3, len(rows) - 1)))
        path.unlink()
        for i, (a, z) in enumerate(zip([0, *cuts], [*cuts, len(rows)], strict=True)):
            # parts may also land in sub-folders: any split of pages/ is allowed
            part = path.parent / (f"part{i}" if i % 2 else "") / f"{i}-{path.name}"
            part.parent.mkdir(exist_ok=True)
            write_rows(part, rows[a:z])
    return b


@PROPS
@given(seed=st.sampled_from(SEEDS), perm=st.integers(0, 2**32))
def test_shuffling_page_event_rows_changes_nothing(seed: int, perm: int) -> None:
    assert baseline(seed)[1], "the simulated incident must have exposures for this property to bite"
    assert summary(Findings(relaid(seed, random.Random(perm), split=False))) == baseline(seed)


@PROPS
@given(seed=st.sampled_from(SEEDS), cut=st.integers(0, 2**32))
def test_splitting_page_event_files_changes_nothing(seed: int, cut: int) -> None:
    assert summary(Findings(relaid(seed, random.Random(cut), split=True))) == baseline(seed)


def page_events(bundle: Path) -> list[dict]:
    """The bundle's page events read straight from the files (not from the tool's tables)."""
    events: list[dict] = []
    for path in sorted((bundle / "pages").rglob("*")):
        if path.name.endswith(".parquet"):
            events += pq.read_table(path).to_pylist()
        elif path.name.endswith(".jsonl"):
            events += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return events


@settings(max_examples=2, deadline=None)
@given(seed=st.sampled_from(SEEDS))
def test_no_exposure_without_a_foreign_write_into_attended_slots(seed: int) -> None:
    bundle = sim_bundle(seed)
    f = Findings(bundle)
    pairs = f.rows("SELECT DISTINCT recipient_room, source_room, node FROM exposures")
    assert pairs
    by_room: dict[int, list[dict]] = {}
    for e in page_events(bundle):
        by_room.setdefault(e["room"], []).append(e)
    for recipient, source, node in pairs:
        assert recipient != source
        writes = [
            (e["start"], e["end"])
            for e in by_room.get(source, [])
            if (e["op"] == "write" and e["node"] == node) or (e["op"] == "transfer" and e.get("peer") == node)
        ]
        reads = [
            (e["start"], e["end"])
            for e in by_room.get(recipient, [])
            if e["op"] in ("read", "share") and e["node"] == node
        ]
        assert any(ws < re and rs < we for ws, we in writes for rs, re in reads), (recipient, source, node)
