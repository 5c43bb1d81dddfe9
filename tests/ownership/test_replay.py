"""The numpy room replay (forensics.ownership.steps.replay) against its window-function SQL reference definition
(tests/reference/room_local.sql), on bundles with placeholders, aborted transfers, shares and injected
foreign writes: the same state before every event of every room piece."""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.ownership import Execution
from forensics.simulate import build_config, simulate
from tests import support
from tests.support.analysis import Findings

REFERENCE = support.REFERENCE / "room_local.sql"
COLUMNS = """node, room, seg_start, seg_end, k, kg, pos, op, ambiguous, ts, ts_hi, src_room, src_op,
             a_k, f_k, w_k, w_amb, r_k, r_ts, i_k, i_room, i_amb"""


@pytest.mark.parametrize(("preset", "seed", "page_size"), [("incident", 5, 64), ("default", 3, 1), ("default", 8, 16)])
def test_replay_matches_sql_reference(tmp_path: Path, preset: str, seed: int, page_size: int) -> None:
    # lifo (pages > 1): aborted rooms' late transfers land in pages already reused (rare under the real
    # PD rule), so the replay has foreign writes to inject
    lifo = "lifo" if page_size > 1 else None
    simulate(tmp_path / "sim", build_config(preset, seed=seed, requests=600, page_size=page_size, allocator=lifo))
    f = Findings(tmp_path / "sim" / "bundle", Execution(screen=False))  # every room, not only screened ones
    got = f.rows(f"SELECT {COLUMNS} FROM room_state ORDER BY ALL")
    assert len(got) > 1000
    assert f.rows("SELECT count(*) FROM room_injected")[0][0] > 0 or preset == "default"
    f.con.execute("SET VARIABLE holders_only = false")  # every room, with every injected write
    f.con.execute(REFERENCE.read_text())
    want = f.rows(f"SELECT {COLUMNS} FROM room_state_new ORDER BY ALL")
    assert got == want
    # holdings: each alloc piece's next free, as the replay found it, against a window over the reference
    nf = f.rows("""SELECT count(*) FROM (
        SELECT node, room, seg_start, k, min(CASE WHEN op = 'free' THEN k END) OVER (
            PARTITION BY node, room, seg_start ORDER BY k ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING) AS f
        FROM room_state_new) r JOIN holdings h ON h.node = r.node AND h.room = r.room AND h.seg_start = r.seg_start
        AND h.a_k = r.k WHERE h.f_k IS DISTINCT FROM r.f""")
    assert nf == [(0,)]


def test_chunked_work_gives_the_same_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rooms (replay) and history items (envelope) are independent: tiny chunks change nothing."""
    import forensics.ownership.steps.history
    import forensics.ownership.steps.replay

    simulate(tmp_path / "sim", build_config("incident", seed=5, requests=600))
    bundle = tmp_path / "sim" / "bundle"
    queries = {
        "room_state": f"SELECT {COLUMNS}, nf_k, nf_kg FROM room_state ORDER BY ALL",
        "history_found": "SELECT * FROM history_found ORDER BY ALL",
        "history_open": "SELECT * FROM history_open ORDER BY ALL",
        "exposures": "SELECT * FROM exposures ORDER BY ALL",
        "affected": "SELECT * FROM affected_responses ORDER BY ALL",
    }
    whole = Findings(bundle, Execution(screen=False))
    want = {name: whole.rows(q) for name, q in queries.items()}
    assert want["history_found"] and want["exposures"]
    monkeypatch.setattr(forensics.ownership.steps.replay, "BUCKET_EVENTS", 700)
    monkeypatch.setattr(forensics.ownership.steps.history, "ENVELOPE_CHUNK", 50)
    calls = {"replay": 0, "envelope": 0}
    replay_node, envelope = forensics.ownership.steps.replay._replay_chunk, forensics.ownership.steps.history.envelope

    def count(name, fn):
        def wrapped(*args):
            calls[name] += 1
            return fn(*args)

        return wrapped

    monkeypatch.setattr(forensics.ownership.steps.replay, "_replay_chunk", count("replay", replay_node))
    monkeypatch.setattr(forensics.ownership.steps.history, "envelope", count("envelope", envelope))
    chunked = Findings(bundle, Execution(screen=False))
    nodes = chunked.rows("SELECT count(*) FROM node_index")[0][0]
    assert calls["replay"] > 2 * nodes and calls["envelope"] > len(forensics.ownership.steps.history.HISTORY_WINDOWS)
    for name, q in queries.items():
        assert chunked.rows(q) == want[name], name
