"""The evidence-bundle contract's column lists (spec sections 2 and 4), shared by every reader and
writer of bundles: ingest, the simulator and the tests."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

GATEWAY_FIELDS = (
    "ts", "request_id", "account_id", "api_token_id", "client_ip", "user_agent", "model", "status",
    "prompt_tokens", "completion_tokens", "duration_ms", "bootstrap_room", "prefill_node", "decode_node", "headers",
)  # fmt: skip

# the gateway log as typed Parquet columns (GATEWAY_FIELDS without headers): what the page-event bundles
# of `forensics simulate --scale --page-events` write as gateway/gateway.parquet
GATEWAY_SCHEMA = pa.schema(
    [("ts", pa.timestamp("us", tz="UTC")), ("request_id", pa.string()), ("account_id", pa.string()),
     ("api_token_id", pa.string()), ("client_ip", pa.string()), ("user_agent", pa.string()), ("model", pa.string()),
     ("status", pa.int32()), ("prompt_tokens", pa.int64()), ("completion_tokens", pa.int64()),
     ("duration_ms", pa.float64()), ("bootstrap_room", pa.int64()), ("prefill_node", pa.string()),
     ("decode_node", pa.string())]
)  # fmt: skip

PAGE_SCHEMA = pa.schema(
    [("node", pa.string()), ("seq", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("op", pa.string()),
     ("room", pa.int64()), ("start", pa.int64()), ("end", pa.int64()), ("peer", pa.string()), ("src", pa.string())]
)  # fmt: skip


def page_table(node: str, events: list[tuple]) -> pa.Table:
    """One node's page events as PAGE_SCHEMA rows, from tuples (seq, ts in epoch µs, op, room, start,
    end, peer, src): what the simulator writes as pages/<node>.parquet."""
    cols = list(zip(*events, strict=True)) if events else [() for _ in range(8)]
    return page_columns(node, *cols)


def page_columns(
    node: str, seq: Any, ts: Any, op: Any, room: Any, start: Any, end: Any, peer: Any, src: Any
) -> pa.Table:
    """The same rows from columns (sequences or numpy arrays; ts in epoch µs, peer and src None where
    absent): the SGLang plugin's recorder hands over its columns as they are."""
    types = [pa.int64(), pa.int64(), pa.string(), pa.int64(), pa.int64(), pa.int64(), pa.string(), pa.string()]
    arrays = [pa.array(c, t) for c, t in zip((seq, ts, op, room, start, end, peer, src), types, strict=True)]
    arrays[1] = arrays[1].cast(pa.timestamp("us", tz="UTC"))
    return pa.table([pa.array([node] * len(arrays[0]), pa.string()), *arrays], schema=PAGE_SCHEMA)


# possible_sources.csv expands every (response, possible source) pair: written when there are at most this
# many (about 400 MB of CSV), or when asked for (--possible-pairs); else possible_source_windows.csv and
# the database's view possible_sources hold them (forensics.findings.possible_pairs_plan)
POSSIBLE_PAIRS_LIMIT = 2_000_000
