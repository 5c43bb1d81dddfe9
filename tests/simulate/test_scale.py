"""forensics simulate --scale (forensics/simulate/scale): a logs-only bundle ingests with no rejected row
and every file read, the row counts equal what the generator says it wrote, its renderer prints numbers
and times as the simulator's writer does, its gateway lines are render_envoy's and render_spendlogs'
(forensics.gateway_formats) for the same requests, the same seed gives the same bytes, and the
investigation of a small bundle agrees with its truth (tests/support/truthcheck.py)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import duckdb
import numpy as np
import pytest

from forensics.gateway_formats import envoy
from forensics.gateway_formats import litellm_spendlogs as spendlogs
from forensics.pipeline import ingest_bundle
from forensics.simulate import writer
from forensics.simulate.request import CUSTOMER_UAS, HOSTILE_UAS, Request
from forensics.simulate.scale import bundle, generate
from forensics.simulate.scale import render as gen
from forensics.simulate.scale.options import Scale, from_cli
from forensics.simulate.scale.rows import Rows, gateway_rows
from forensics.simulate.scale.templates import Bundle
from forensics.simulate.scale.traffic import centi, draw, tenths_ms, timeline
from tests.support.truthcheck import compare

ARGS = [
    "--requests",
    "3000",
    "--days",
    "3",
    "--decode-nodes",
    "6",
    "--prefill-nodes",
    "3",
    "--long-rate",
    "0.03",
    "--abort-rate",
    "0.03",
    "--oversize-rate",
    "0.01",
    "--accounts",
    "60",
    "--chunk",
    "1000",
    "--seed",
    "5",
]


def _opts(args: list[str]) -> Scale:
    return from_cli(dict(zip(args[::2], [_num(v) for v in args[1::2]], strict=True)))


def _num(v: str) -> object:
    return float(v) if "." in v else int(v) if v.isdigit() else v


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, Path]:
    out = tmp_path_factory.mktemp("logs") / "gen"
    meta = generate(out, _opts(ARGS))
    db = out.parent / "incident.duckdb"
    ingest_bundle(out / "bundle", db)
    return out, meta, db


def test_every_line_is_read_and_none_rejected(made: tuple[Path, dict, Path]) -> None:
    out, meta, db = made
    manifest = json.loads((db.parent / "manifest.json").read_text())["inputs"]
    read = {e["path"]: e for e in manifest if e["source"] != "config"}
    written = {p: n for p, n in meta["files"].items()}
    assert set(read) == set(written)  # every file the generator wrote is read (and nothing else)
    for path, n in written.items():
        e = read[path]
        header = 1 if path.endswith(".csv") else 0
        assert (e["rows_read"], e["rows_loaded"], e["rows_rejected"]) == (n - header, n - header, 0), path
        assert "error" not in e, e
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM rejected").fetchone()[0] == 0
        kinds = dict(con.execute("SELECT kind, count(*) FROM engine_requests GROUP BY 1").fetchall())
        k = meta["kinds"]
        assert kinds == {
            "time_stats": k["time_stats"],
            "finished": k["json_finished"] + k["text_finished"],
            "received": k["text_received"],
            "overlength": k["overlength"],
            "decode_transfer_failed": k["transfer_failed"],
        }
        assert con.execute("SELECT count(*) FROM batch_stats").fetchone()[0] == k["decode_batch"] + k["prefill_batch"]
        assert con.execute("SELECT count(*) FROM gateway").fetchone()[0] == meta["requests"] == 3000
        assert k["litellm"] + k["envoy"] == 3000
        # the records their ids do not join: joined by time (model, window, length) or not at all
        by_time = con.execute("SELECT count(*) FROM gateway_joined WHERE how IN ('time+length', 'time')").fetchone()[0]
        assert con.execute("SELECT count(*) FROM gateway_unjoined").fetchone()[0] + by_time == meta["unjoined_expected"]
        nodes = con.execute("SELECT count(*), count(pool_tokens), count(page_size) FROM node_config").fetchone()
        assert nodes == (9, 9, 9)
    # the shapes the benchmark is for: placeholders, aborts, both request-log forms, rotated files
    assert meta["placeholders"] > 0 and meta["aborted"] > 0 and meta["oversize"] > 0
    assert k["text_finished"] > 0 and k["json_finished"] > 0 and k["decode_batch"] > 0
    assert any("server-2026" in p for p in written) and any(p.endswith("/server.log") for p in written)


def _render(parts: list, slots: dict, cols: list[str], values: dict[str, np.ndarray]) -> list[str]:
    pool = gen.Pool()
    progs = gen.Programs(pool)
    prog = progs.add(parts, slots, {"ts": 1, **{c: 4 + i for i, c in enumerate(cols)}})
    n = len(next(iter(values.values())))
    M = np.zeros((n, 4 + len(cols)), dtype=np.int64)
    M[:, 3] = prog
    for c, v in values.items():
        M[:, 1 if c == "ts" else 4 + cols.index(c)] = v
    ops, ps, pe, bounds = progs.arrays()
    pdata, poff = pool.arrays()
    buf = np.empty(int(bounds[M[:, 3]].sum()), dtype=np.uint8)
    off = np.empty(n + 1, dtype=np.int64)
    gen._render(M, ops, ps, pe, pdata, poff, buf, off)
    return [bytes(buf[off[i] : off[i + 1]]).decode() for i in range(n)]


def test_numbers_and_times_print_as_the_writer_prints_them() -> None:
    rng = np.random.default_rng(3)
    us = np.r_[
        rng.integers(1_700_000_000_000_000, 1_800_000_000_000_000, 2000),
        1_787_702_400_000_000,
        1_787_702_400_000_500,
        1_787_702_399_999_500,
        1_787_702_400_120_000,
    ]
    k = rng.integers(0, 10**9, len(us))
    parts = [
        ("slot", s) if i % 2 == 0 else ("lit", "|")
        for i, s in enumerate(
            [
                "log",
                "x",
                "logms",
                "x",
                "iso",
                "x",
                "isoz",
                "x",
                "pg",
                "x",
                "f4",
                "x",
                "r4",
                "x",
                "f2",
                "x",
                "int",
                "x",
                "hex",
            ]
        )
    ]
    slots = {
        "log": [(gen.TS, "ts", gen.TS_LOG)],
        "logms": [(gen.TS, "ts", gen.TS_LOG_MS)],
        "iso": [(gen.TS, "ts", gen.TS_ISO_US)],
        "isoz": [(gen.TS, "ts", gen.TS_ISO_MS_Z)],
        "pg": [(gen.TS, "ts", gen.TS_PG)],
        "f4": [(gen.FIX, "k", 4)],
        "r4": [(gen.REPR, "k", 4)],
        "f2": [(gen.FIX, "k", 2)],
        "int": [(gen.INT, "k", 0)],
        "hex": [(gen.HEX, "k", 16)],
    }
    lines = _render(parts, slots, ["k"], {"ts": us, "k": k})
    for t, v, line in zip(us.tolist(), k.tolist(), lines, strict=True):
        want = [
            writer.log_ts(t, False),
            writer.log_ts(t, True),
            writer.iso_us(t),
            writer.iso_ms_z(t),
            spendlogs.pg_ts(t),
            f"{v / 1e4:.4f}",
            json.dumps(round(v / 1e4, 4)),
            f"{v / 100:.2f}",
            str(v),
            f"{v:016x}",
        ]
        assert line.split("|") == want
    # the integer roundings the generator prints with (half up): {x:.4f} of a duration in us, .2f of a ratio
    d = np.array([0, 49, 50, 149, 150, 123_456_789])
    assert tenths_ms(d).tolist() == [0, 0, 1, 1, 2, 1_234_568]
    assert centi(np.array([1, 1, 2, 0]), np.array([3, 200, 3, 5])).tolist() == [33, 1, 67, 0]


def _requests(b, r: dict) -> list[Request]:
    names = [b.pool.items[i].decode() for i in range(len(b.pool.items))]
    uas = list(CUSTOMER_UAS) + list(HOSTILE_UAS)
    out = []
    for i in range(len(r["t0"])):

        def h(col: str, i: int = i) -> str:
            return f"{int(r[col][i]) & (2**64 - 1):016x}"

        out.append(
            Request(
                idx=i,
                request_id="req-" + h("rq"),
                t0=int(r["t0"][i]),
                account=names[b.t_acct[r["acct"][i]]],
                token=names[r["tok"][i]],
                ip=names[b.t_ip[r["acct"][i]]],
                ua=uas[r["ua"][i]],
                headers=None,
                L=int(r["L"][i]),
                out=int(r["out"][i]),
                sp_id=-1,
                sp_len=0,
                abort=bool(r["ab"][i]),
                prefill="p",
                decode="d",
                room=int(r["room"][i]),
                rid_p=h("ridp_hi") + h("ridp_lo"),
                rid_d=h("ridd_hi") + h("ridd_lo"),
                gw=0,
                status=int(r["status"][i]),
                completion=int(r["out"][i]) if r["status"][i] == 200 else 0,
                t_end=int(r["t_end"][i]),
            )
        )
    return out


def test_gateway_lines_are_the_formats_writers_lines(tmp_path: Path) -> None:
    a = _opts(ARGS)
    b = bundle(a)
    rate = np.ones(a.days * 1440)
    r = draw(b, np.random.default_rng(9), 0, 400, 0, len(rate), rate)
    r["ua"][:16] = np.arange(16)  # every user agent, the hostile ones too
    r["ab"][16:40], r["ov"][40:60] = True, True
    timeline(b, r, np.zeros(b.P, dtype=np.int64))
    rows = Rows(Bundle.W)
    gateway_rows(b, r, rows)
    M = rows.buf[: rows.n]
    ops, ps, pe, bounds = b.progs.arrays()
    pdata, poff = b.pool.arrays()
    buf = np.empty(int(bounds[M[:, 3]].sum()), dtype=np.uint8)
    off = np.empty(len(M) + 1, dtype=np.int64)
    gen._render(M, ops, ps, pe, pdata, poff, buf, off)
    reqs = _requests(b, r)
    seen = {200: 0, 499: 0, 400: 0}
    for j in range(len(M)):
        line = bytes(buf[off[j] : off[j + 1]]).decode()
        req = reqs[int(M[j, 2])]
        seen[req.status] += 1
        if M[j, 0] == 2 * b.NN + 1:  # Envoy: the same record but the addresses (a digest there, drawn here)
            want = json.loads(envoy.render_envoy(b.cfg, [req], {}).files[envoy.ENVOY_FILE])
            got = json.loads(line)
            for key in ("downstream_remote_address", "upstream_local_address"):
                assert got.pop(key).rsplit(":", 1)[0] == want.pop(key).rsplit(":", 1)[0]
            assert list(got) == sorted(got) and got == want
        else:  # LiteLLM: the same row but the ids LiteLLM draws (session_id; a failure's call id) and a
            # failure's prompt estimate (the generator writes the engine's length, the simulator draws it off)
            text = spendlogs.render_spendlogs(b.cfg, [req], {}).files["spend_logs.csv"].decode()
            want_row = next(csv.reader(io.StringIO(text.split("\n", 1)[1])))
            got_row = next(csv.reader(io.StringIO(line)))
            cols = list(spendlogs.SPENDLOGS_COLUMNS)
            drawn = {"session_id"} | ({"request_id"} if req.status != 200 else set())
            for c, g, w in zip(cols, got_row, want_row, strict=True):
                if c in drawn:
                    assert len(g) == 36 and g[14] == "4" and g[19] in "89ab", (c, g)
                elif req.status != 200 and c in ("prompt_tokens", "total_tokens"):
                    assert int(g) == req.L and abs(int(w) - req.L) <= 0.1 * req.L + 1, (c, g, w)
                else:
                    assert g == w, (c, g, w)
    assert all(seen.values())


def test_the_per_row_loops_are_compiled() -> None:
    """The loops over every line and request run compiled (numba), or 100M requests take a day."""
    from forensics.simulate.scale import rows, traffic

    for f in (gen._render, gen._put_ts, rows._rows_from_columns, traffic._serialize):
        assert hasattr(f, "py_func"), f


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    """Bundle and truth, byte for byte, gzip headers included; another seed differs."""
    args = ["--requests", "600", "--days", "2", "--decode-nodes", "3", "--prefill-nodes", "2", "--chunk", "200"]
    args += ["--rotation", "numbered-gz", "--accounts", "30"]
    one, two, other = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    generate(one, _opts([*args, "--seed", "4"]))
    generate(two, _opts([*args, "--seed", "4"]))
    generate(other, _opts([*args, "--seed", "5"]))
    a = _tree(one)
    assert any(p.endswith(".gz") for p in a) and "truth/responses.csv" in a
    assert a == _tree(two)
    assert a["truth/responses.csv"] != _tree(other)["truth/responses.csv"]


@pytest.mark.slow
def test_investigation_agrees_with_truth(made: tuple[Path, dict, Path]) -> None:
    """The placeholder signature found from the logs alone: every completed placeholder response affected,
    nothing confirmed that the truth does not expose, nothing indeterminate that the truth does not allow."""
    out, meta, _ = made
    truth = (out / "truth" / "responses.csv").read_text().splitlines()
    assert len(truth) == 1 + meta["requests"]
    assert sum(1 for x in truth[1:] if x.split(",")[9] == "1") > 0  # exposed placeholders
    c = compare(out)
    assert (c.missed, c.false_confirmed, c.bad_indeterminate) == ([], [], [])
    assert c.truth_pairs == 0  # no pairs are known without pages (truth.py)
