"""Ingest stage, SGLang's periodic batch lines (`Decode batch ...`, `Prefill batch ...`): the batch_stats
table's layout. Each line's row is made by its shape's row builder (forensics.engines.sglang.rows
batch_row: NULL where the line's release does not print a field); a line whose fields cannot be read is
rejected with its file and line.
"""

from __future__ import annotations

import pyarrow as pa

from forensics.engines.sglang.rows import BATCH_COLUMNS as COLUMNS
from forensics.engines.sglang.rules import BATCH_FLOATS

SCHEMA = pa.schema(
    [
        ("node", pa.string()),
        ("file_id", pa.int32()),
        ("line", pa.int64()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("kind", pa.string()),
        *[(c, pa.float64() if c in BATCH_FLOATS else pa.int64()) for c in COLUMNS],
        ("graph", pa.bool_()),
    ]
)
