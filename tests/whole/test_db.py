"""forensics.db.connect: the memory settings it makes (the block memory DuckDB keeps for reuse is a
quarter of the limit, or of the machine when the limit is larger)."""

from __future__ import annotations

from forensics.db import connect, memory_limit_bytes, physical_memory


def _kept(con) -> str:
    return con.execute("SELECT current_setting('block_allocator_memory')").fetchall()[0][0]


def test_memory_limit_bytes_and_the_block_memory_kept() -> None:
    con = connect(":memory:", memory_limit="8GB")
    assert memory_limit_bytes(con) == int(7.4 * (1 << 30))  # DuckDB shows 8 GB as '7.4 GiB'
    assert _kept(con) == "1.8 GiB"
    small = connect(":memory:", memory_limit="400MB")
    assert abs(memory_limit_bytes(small) - 400 * 10**6) < 10**6
    assert _kept(small).endswith("MiB")
    huge = connect(":memory:", memory_limit="1TB")  # beyond the machine: a quarter of the machine
    kept = _kept(huge)
    assert kept.endswith("GiB") and float(kept.split()[0]) * (1 << 30) <= physical_memory() / 4 * 1.01
