"""One hand-written bundle per ownership rule (spec section 4), checked against expected rows."""

from __future__ import annotations

import csv
from pathlib import Path

from forensics.pipeline import investigate
from tests.support.analysis import Findings
from tests.support.bundlekit import Node, engine_log, gw, write_jsonl, write_pages

PS = 16


def _bundle(tmp_path: Path, gateway: list[dict], *nodes: Node, decode_pool: int = 2048, logs=None) -> Path:
    b = tmp_path / "bundle"
    write_jsonl(b / "gateway" / "gw.jsonl", gateway)
    engine_log(b, "prefill-0", "prefill", 1024, lines=(logs or {}).get("prefill-0", []))
    engine_log(b, "decode-0", "decode", decode_pool, lines=(logs or {}).get("decode-0", []))
    write_pages(b, *nodes)
    return b


def _ordinary(
    p: Node,
    d: Node,
    room: int,
    dec: tuple[int, int],
    n: int,
    t: float,
    out: tuple[int, int] | None = None,
    pslots: tuple[int, int] = (512, 576),
) -> None:
    """A normal PD request: decode allocates, prefill computes and transfers n slots, decode reads and frees."""
    d.ev("alloc", room, dec[0], dec[1], t=t)
    p.ev("alloc", room, pslots[0], pslots[1], t=t + 0.001)
    p.ev("write", room, pslots[0], pslots[0] + n, src="prefill")
    p.ev("transfer", room, dec[0], dec[0] + n, peer="decode-0", t=t + 0.02)
    p.ev("free", room, pslots[0], pslots[1])
    d.ev("read", room, dec[0], dec[0] + n, t=t + 0.05)
    if out:
        d.ev("alloc", room, out[0], out[1])
        d.ev("write", room, out[0], out[0] + 3, src="decode")
        d.ev("free", room, out[0], out[1])
    d.ev("free", room, dec[0], dec[1], t=t + 0.2)


def test_contract_example_matches_expected(tmp_path: Path, example_bundle: Path) -> None:
    out = tmp_path / "out"
    f = Findings(example_bundle)
    expected_dir = example_bundle.parent / "expected"
    for name, table in (
        ("affected_responses.csv", "affected_responses"),
        ("exposures.csv", "exposures"),
        ("coverage.csv", "coverage"),
        ("hazards.csv", "hazards"),
    ):
        with (expected_dir / name).open() as fh:
            rows = list(csv.DictReader(fh))
        cols = list(rows[0].keys())
        got = f.rows(f"SELECT {', '.join(cols)} FROM {table} ORDER BY ALL")
        from forensics.outputs import cell

        got_rows = sorted(
            [{c: str(cell(v)) for c, v in zip(cols, r, strict=True)} for r in got], key=lambda r: tuple(r.values())
        )
        exp_rows = sorted(rows, key=lambda r: tuple(r.values()))
        if name == "hazards.csv":  # detail wording is ours; the facts are compared
            cols = ["node", "room", "kind", "slots"]
            got_rows = [{c: r[c] for c in cols} for r in got_rows]
            exp_rows = [{c: r[c] for c in cols} for r in exp_rows]
        assert got_rows == exp_rows, name
    del out


def test_stale_read_of_a_placeholder(tmp_path: Path) -> None:
    p, d = Node("prefill-0", 100), Node("decode-0", 1)
    _ordinary(p, d, 1, (16, 64), 40, t=1.0)  # room 1 leaves its prompt in [16,56)
    d.ev("alloc", 2, 16, 160, t=2.0)  # room 2: 140-token placeholder prompt
    p.ev("alloc", 2, 512, 528, t=2.001).ev("write", 2, 512, 513, src="prefill")
    p.ev("transfer", 2, 16, 17, peer="decode-0", t=2.02)
    d.ev("read", 2, 16, 156, t=2.05).ev("free", 2, 16, 160, t=2.2)
    b = _bundle(tmp_path, [gw("A", 1, "acct-a"), gw("B", 2, "acct-b")], p, d)
    f = Findings(b)
    assert f.exposures() == {("B", "A", "decode-0", "stale", 39, "confirmed")}
    assert f.affected() == {"B": ("confirmed", "pages", "stale", 39)}
    assert ("decode-0", 2, "uninitialized_read", 156 - 56) in f.hazards()


def test_foreign_write_during_attention(tmp_path: Path) -> None:
    p, d = Node("prefill-0", 100), Node("decode-0", 1)
    _ordinary(p, d, 9, (800, 816), 10, t=0.5)  # gives the clock bounds
    d.ev("alloc", 3, 16, 48, t=1.0)  # room 3: aborted, decode frees at once
    d.ev("free", 3, 16, 48, t=1.05)
    _ordinary(p, d, 4, (16, 48), 20, t=1.1, pslots=(600, 632))  # room 4 gets the same slots and reads
    # room 4's free is at 1.3; room 3's transfer lands at 1.25 while room 4 attends [16,36)
    d.rows[-1]["ts"] = "2026-08-29T10:00:01.400Z"
    p.ev("alloc", 3, 700, 732, t=1.0).ev("write", 3, 700, 730, src="prefill")
    p.ev("transfer", 3, 16, 46, peer="decode-0", t=1.25)
    b = _bundle(tmp_path, [gw("R9", 9), gw("C", 3, "acct-c", status=499), gw("D", 4, "acct-d")], p, d)
    f = Findings(b)
    assert f.exposures() == {("D", "C", "decode-0", "foreign_write", 20, "confirmed")}
    assert f.affected()["D"] == ("confirmed", "pages", "foreign_write", 20)
    assert ("decode-0", 3, "write_after_free", 30) in f.hazards()
    first = f.rows("SELECT first_exposed_at FROM exposures")[0][0]
    assert first.second == 1 and first.microsecond // 1000 == 230  # xts 1.250 + lo (-20 ms): the earliest moment


def test_double_allocation_and_the_other_holders_write(tmp_path: Path) -> None:
    p, d = Node("prefill-0", 100), Node("decode-0", 1)
    _ordinary(p, d, 9, (800, 816), 10, t=0.5)
    d.ev("alloc", 1, 16, 48, t=1.0)
    p.ev("alloc", 1, 512, 544, t=1.0).ev("write", 1, 512, 542, src="prefill")
    p.ev("transfer", 1, 16, 46, peer="decode-0", t=1.02)
    d.ev("read", 1, 16, 46, t=1.05)
    d.ev("alloc", 2, 16, 48, t=1.1)  # the allocator hands room 1's slots to room 2 as well
    p.ev("alloc", 2, 600, 632, t=1.1).ev("write", 2, 600, 620, src="prefill")
    p.ev("transfer", 2, 16, 36, peer="decode-0", t=1.2)
    d.ev("read", 2, 16, 36, t=1.3).ev("free", 2, 16, 48, t=1.4).ev("free", 1, 16, 48, t=1.5)
    b = _bundle(tmp_path, [gw("R9", 9), gw("A", 1, "acct-a"), gw("B", 2, "acct-b")], p, d)
    f = Findings(b)
    assert ("A", "B", "decode-0", "foreign_write", 20, "confirmed") in f.exposures()
    assert ("decode-0", 2, "double_alloc", 32) in f.hazards()
    assert not any(h[2] == "write_after_free" for h in f.hazards())


def test_shared_prefix_is_not_a_leak(tmp_path: Path) -> None:
    p, d = Node("prefill-0", 100), Node("decode-0", 1)
    p.ev("alloc", 1, 16, 48, t=1.0).ev("write", 1, 16, 40, src="prefill").ev("read", 1, 16, 40)
    p.ev("share", 2, 16, 32, t=2.0).ev("alloc", 2, 48, 64).ev("write", 2, 48, 60, src="prefill").ev("read", 2, 48, 60)
    p.ev("free", 2, 48, 64).ev("free", 1, 16, 48, t=3.0)
    b = _bundle(tmp_path, [gw("A", 1, "acct-a"), gw("B", 2, "acct-b")], p, d)
    f = Findings(b)
    assert f.exposures() == set()
    assert f.affected() == {}
    shared = f.rows(
        "SELECT room, w_room, sum(seg_end - seg_start) FROM read_provenance WHERE cls = 'shared' GROUP BY ALL"
    )
    assert shared == [(2, 1, 16)]


def test_uninitialized_read_is_a_hazard_not_an_exposure(tmp_path: Path) -> None:
    p, d = Node("prefill-0", 100), Node("decode-0", 1)
    d.ev("alloc", 5, 16, 80, t=1.0)
    p.ev("alloc", 5, 512, 528, t=1.001).ev("write", 5, 512, 513, src="prefill").ev(
        "transfer", 5, 16, 17, peer="decode-0"
    )
    d.ev("read", 5, 16, 70, t=1.05).ev("free", 5, 16, 80)
    b = _bundle(tmp_path, [gw("E", 5)], p, d)
    f = Findings(b)
    assert f.exposures() == set() and f.affected() == {}
    assert f.hazards() == {("decode-0", 5, "uninitialized_read", 53)}


def test_seq_gap_makes_later_reads_indeterminate(tmp_path: Path) -> None:
    p, d = Node("prefill-0", 100), Node("decode-0", 1)
    _ordinary(p, d, 1, (16, 64), 40, t=1.0)
    _ordinary(p, d, 7, (300, 316), 10, t=1.5)
    d.seq += 5  # five decode events lost
    d.ev("alloc", 2, 16, 160, t=2.0)
    p.ev("alloc", 2, 512, 528, t=2.001).ev("write", 2, 512, 513, src="prefill").ev(
        "transfer", 2, 16, 17, peer="decode-0"
    )
    d.ev("read", 2, 16, 156, t=2.05).ev("free", 2, 16, 160)
    _ordinary(p, d, 3, (600, 616), 10, t=3.0)  # after the gap, fully visible: clean
    b = _bundle(tmp_path, [gw("A", 1), gw("B", 2), gw("G", 7), gw("C", 3)], p, d)
    f = Findings(b)
    aff = f.affected()
    assert aff["B"][0] == "indeterminate"  # its stale read might be a lost write's
    assert "C" not in aff and "A" not in aff
    assert f.rows("SELECT seq_gaps, events_lost FROM coverage WHERE node = 'decode-0'") == [(1, 5)]
    assert ("B", "A", "decode-0", "stale", 39, "indeterminate") in f.exposures()


def test_late_write_the_clock_bounds_cannot_order(tmp_path: Path) -> None:
    p, d = Node("prefill-0", 100), Node("decode-0", 1)
    _ordinary(p, d, 9, (800, 816), 10, t=0.5)
    # a wide clock window: ordinary transfer 9 lands between decode alloc 0.5 and read 0.55 -> +-25 ms
    d.ev("alloc", 3, 16, 48, t=1.0).ev("free", 3, 16, 48, t=1.01)
    d.ev("alloc", 4, 16, 48, t=1.02)
    p.ev("alloc", 4, 600, 632, t=1.0).ev("write", 4, 600, 620, src="prefill")
    p.ev("transfer", 4, 16, 36, peer="decode-0", t=1.03)
    d.ev("read", 4, 16, 36, t=1.04).ev("free", 4, 16, 48, t=1.3)
    p.ev("alloc", 3, 700, 732, t=1.0).ev("write", 3, 700, 730, src="prefill")
    p.ev("transfer", 3, 16, 46, peer="decode-0", t=1.035)  # lands within ms of room 4's read
    b = _bundle(tmp_path, [gw("R9", 9), gw("C", 3, status=499), gw("D", 4)], p, d)
    f = Findings(b)
    aff = f.affected()
    assert aff["D"][0] == "indeterminate"
    assert all(r[5] == "indeterminate" for r in f.exposures())


def test_signature_only_node(tmp_path: Path) -> None:
    p, d = Node("prefill-0", 100), Node("decode-0", 1)
    _ordinary(p, d, 1, (16, 64), 40, t=1.0)
    p.ev("alloc", 77, 512, 528, t=5.0).ev("write", 77, 512, 513, src="prefill").ev(
        "transfer", 77, 16, 17, peer="decode-1"
    )
    p.ev("alloc", 78, 512, 528, t=6.0).ev("write", 78, 512, 542, src="prefill").ev(
        "transfer", 78, 16, 46, peer="decode-1"
    )
    logs = {
        "prefill-0": [
            "[2026-08-29 10:00:05.000 TP0] Input length (3000 tokens) exceeds the maximum allowed length "
            "(1018 tokens). Use a shorter input or enable --allow-auto-truncate., self.rid='p-sig'",
            "[2026-08-29 10:00:05.010 TP0] Req Time Stats(rid=p-sig, bootstrap_room=77, input len=1, output len=1, "
            "type=prefill): x",
            "[2026-08-29 10:00:06.010 TP0] Req Time Stats(rid=p-ok, bootstrap_room=78, input len=30, output len=1, "
            "type=prefill): x",
        ]
    }
    b = _bundle(
        tmp_path,
        [
            gw("A", 1),
            gw("S", 77, "acct-s", decode="decode-1", prompt_tokens=3000),
            gw("T", 78, "acct-t", decode="decode-1", prompt_tokens=30),
        ],
        p,
        d,
        logs=logs,
    )
    engine_log(b, "decode-1", "decode", 4096)
    f = Findings(b)
    aff = f.affected()
    assert aff == {"S": ("indeterminate", "signature", "stale", None)}
    cov = dict(
        (r[0], r[1:]) for r in f.rows("SELECT node, page_telemetry, responses_served, responses_verified FROM coverage")
    )
    assert cov["decode-1"] == ("no", 2, 0)


def test_served_request_without_events_is_indeterminate(tmp_path: Path) -> None:
    p, d = Node("prefill-0", 100), Node("decode-0", 1)
    _ordinary(p, d, 1, (16, 64), 40, t=1.0)
    b = _bundle(tmp_path, [gw("A", 1), gw("M", 55), gw("R", 56, status=503, completion_tokens=0)], p, d)
    aff = Findings(b).affected()
    assert set(aff) == {"M"} and aff["M"][0] == "indeterminate"


def test_investigate_writes_contract_files(tmp_path: Path, example_bundle: Path) -> None:
    investigate(example_bundle, tmp_path / "out")
    for name in (
        "affected_responses.csv",
        "exposures.csv",
        "accounts.csv",
        "hazards.csv",
        "coverage.csv",
        "rejected.csv",
        "manifest.json",
        "report.html",
        "report.md",
    ):
        assert (tmp_path / "out" / name).is_file(), name
    assert (tmp_path / "out" / "incident.duckdb").is_file()
