"""Possible sources without their pairs (forensics.findings.possible): the reachable flag of every source
and the count of every response's possible sources equal what expanding the pairs by the rule
(possible_pair) gives, on random pools with unknown times, start-ups, aborted sources, shared rooms and
request ids; and the pairs' CSV is left out when asked, with the accounts unchanged."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest

from forensics.db import connect
from forensics.findings.possible import possible_reach
from forensics.findings.rules import define_rules
from forensics.simulate import build_config, simulate

T0 = 1_790_000_000


def _ts(rng: random.Random, p_null: float) -> str | None:
    return None if rng.random() < p_null else str(T0 * 1_000_000 + rng.randrange(0, 600) * 1_000_000)


def _random_tables(seed: int):
    rng = random.Random(seed)
    con = connect(":memory:")
    define_rules(con)  # possible_pair
    con.execute("""CREATE TABLE possible_pool (node VARCHAR, room BIGINT, request_id VARCHAR, started TIMESTAMPTZ,
        gone_at TIMESTAMPTZ, reachable BOOLEAN)""")
    con.execute("""CREATE TABLE possible_windows (recipient_request_id VARCHAR, node VARCHAR, recipient_room BIGINT,
        started TIMESTAMPTZ, finished TIMESTAMPTZ, sources BIGINT)""")
    starts = [rng.randrange(100, 500) for _ in range(rng.randrange(0, 4))]
    for node in ("d0", "d1"):
        for _ in range(rng.randrange(5, 60)):
            room = rng.randrange(0, 40) if rng.random() > 0.05 else None
            rid = f"req-{rng.randrange(0, 45)}" if rng.random() > 0.1 else None
            started = _ts(rng, 0.2)
            gone = rng.choice(starts) if starts and rng.random() < 0.5 else None
            gone_sql = str((T0 + gone) * 1_000_000) if gone is not None else "NULL"
            con.execute(
                f"INSERT INTO possible_pool VALUES (?, ?, ?, make_timestamptz({started or 'NULL'}), "
                f"make_timestamptz({gone_sql}), NULL)",
                [node, room, rid],
            )
        for _ in range(rng.randrange(1, 12)):
            room = rng.randrange(0, 40)
            con.execute(
                f"INSERT INTO possible_windows VALUES (?, ?, ?, make_timestamptz({_ts(rng, 0.15) or 'NULL'}), "
                f"make_timestamptz({_ts(rng, 0.15) or 'NULL'}), NULL)",
                [f"req-{rng.randrange(0, 45)}", node, room],
            )
    return con


@pytest.mark.parametrize("seed", range(40))
def test_counts_without_pairs_equal_the_expanded_pairs(seed: int) -> None:
    con = _random_tables(seed)
    possible_reach(con)
    pairs = """SELECT r.rowid AS r_id, s.rowid AS s_id FROM possible_windows r JOIN possible_pool s
        ON s.node = r.node AND s.room IS DISTINCT FROM r.recipient_room
        WHERE s.request_id IS DISTINCT FROM r.recipient_request_id
          AND possible_pair(s.started, s.gone_at, r.started, r.finished)"""
    want_reach = {r[0] for r in con.execute(f"SELECT DISTINCT s_id FROM ({pairs})").fetchall()}
    got_reach = {r[0] for r in con.execute("SELECT rowid FROM possible_pool WHERE reachable").fetchall()}
    assert got_reach == want_reach
    assert con.execute("SELECT count(*) FROM possible_pool WHERE reachable IS NULL").fetchone() == (0,)
    want = dict(con.execute(f"SELECT r_id, count(*) FROM ({pairs}) GROUP BY 1").fetchall())
    got = dict(con.execute("SELECT rowid, sources FROM possible_windows").fetchall())
    assert got == {k: want.get(k, 0) for k in got}


def test_start_ups_and_unknown_times_on_hand_made_tables() -> None:
    """The hand-made node of test_possible_sources: the compact count of the one response's sources is
    the four sources the expanded view lists."""
    from tests.findings.test_possible_sources import hand_made_node

    con = hand_made_node()
    possible_reach(con)
    assert con.execute("SELECT sources FROM possible_windows").fetchall() == [(4,)]
    view = {r[0] for r in con.execute("SELECT DISTINCT source_room FROM possible_sources").fetchall()}
    reach = {r[0] for r in con.execute("SELECT room FROM possible_pool WHERE reachable").fetchall()}
    assert reach == view


@pytest.mark.slow
def test_no_possible_pairs_leaves_the_pairs_csv_out_and_the_accounts_unchanged(tmp_path: Path) -> None:
    # the CLI's options and --json in this process (CliRunner): a process of its own would add only its
    # start-up, which tests/whole/test_cli.py and test_hardening.py test
    from typer.testing import CliRunner

    from forensics.cli import app

    sim = tmp_path / "sim"
    simulate(sim, build_config("default", seed=44, requests=500, no_telemetry="decode-1"))
    outs = {}
    for flag in ("--possible-pairs", "--no-possible-pairs"):
        out = tmp_path / flag
        r = CliRunner().invoke(app, ["investigate", str(sim / "bundle"), "--out", str(out), "--json", flag])
        assert r.exit_code == 0, r.output
        outs[flag] = (out, json.loads(r.stdout)["possible_pairs"])
    (full, plan_full), (slim, plan_slim) = outs["--possible-pairs"], outs["--no-possible-pairs"]
    assert plan_full["written"] and not plan_slim["written"] and plan_full["pairs"] == plan_slim["pairs"] > 0
    assert not (slim / "possible_sources.csv").exists()
    with (full / "possible_sources.csv").open() as fh:
        assert sum(1 for _ in csv.DictReader(fh)) == plan_full["pairs"]
    with (slim / "possible_source_windows.csv").open() as fh:
        assert sum(int(r["possible_sources"]) for r in csv.DictReader(fh)) == plan_slim["pairs"]
    for name in ("accounts.csv", "notifications.csv", "affected_responses.csv", "report.md"):
        assert (full / name).read_bytes() == (slim / name).read_bytes(), name
    assert "view possible_sources" in json.loads((slim / "manifest.json").read_text())["possible_sources"]["why"]
