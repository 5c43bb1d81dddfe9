"""The event-key layout and the op codes, written once: Python constants and the DuckDB macros that
mirror them (MACROS, created on every connection by forensics.db.connect, so every query file uses
the macros, never the numbers).

A node's events form one ordered stream. Its own event with seq s sits at position pos = 2*s; the
transfers that landed in its pool right after its event seq_lo sit at pos = 2*seq_lo + 1, ranked
among themselves by sub = 1, 2, ... (forensics/ownership/queries/timeline/). One BIGINT orders a
node's stream:

    k = pos * SUB_SPAN + sub          (own events: sub = 0, so k = seq * OWN_STRIDE)

Across nodes, node_index gives each node a base = number * NODE_SPAN (numbered from 1), so that
base + rank orders (node, event) pairs as one BIGINT and range joins need no equality on node.
"""

from __future__ import annotations

SUB_SPAN = 1 << 20  # transfers that land at one position: at most SUB_SPAN - 1
OWN_STRIDE = 2 * SUB_SPAN  # k of an own event = seq * OWN_STRIDE; landed transfers fall between
NODE_SPAN = 1 << 40  # a node's base = its number * NODE_SPAN; ranks within a node stay below it

# op codes on the way through numpy: an index into OPS (the screen, its walk and the replay share it).
# "inj" is not a logged op: a foreign write injected into the history of the room it hit.
OPS = ("alloc", "free", "write", "xfer", "read", "share", "inj")
# each code by name, for the code that tests ops (the compiled walks take them as constants)
OP_ALLOC, OP_FREE, OP_WRITE, OP_XFER = OPS.index("alloc"), OPS.index("free"), OPS.index("write"), OPS.index("xfer")
OP_READ, OP_SHARE, OP_INJ = OPS.index("read"), OPS.index("share"), OPS.index("inj")

MACROS = {
    # the position of an own event, and of the transfers that landed right after own event seq_lo
    "own_pos(seq)": "seq * 2",
    "landed_pos(seq_lo)": "seq_lo * 2 + 1",
    "is_landed_pos(pos)": "pos % 2 = 1",
    # the key of a position and rank, and back
    "kv_key(pos, sub)": f"pos * {SUB_SPAN} + sub",
    "own_key(seq)": f"seq * {OWN_STRIDE}",
    "key_pos(k)": f"k // {SUB_SPAN}",
    "key_sub(k)": f"k % {SUB_SPAN}",
    "is_landed(k)": f"k % {OWN_STRIDE} <> 0",  # a transfer that landed, not the node's own event
    "key_seq(k)": f"k // {OWN_STRIDE}",  # the seq of an own event's key
    # a node's base from its number, and back
    "node_base(n)": f"n * {NODE_SPAN}",
    "node_number(base)": f"base >> {NODE_SPAN.bit_length() - 1}",
    "node_end(base)": f"base + {NODE_SPAN - 1}",  # a node's highest rank: the open end of a holding
    # an op's code (its index in OPS); NULL for an op not in OPS
    "op_code(op)": "CASE op " + " ".join(f"WHEN '{o}' THEN {i}" for i, o in enumerate(OPS)) + " END",
    "op_name(code)": "['" + "', '".join(OPS) + "'][code + 1]",
}
