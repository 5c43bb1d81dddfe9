"""What both page-event generators share: the trace's clock origin, the page ops' codes, the nodes'
start-up lines (the simulator's writer) and the gateway's Parquet records (forensics.contract's
GATEWAY_SCHEMA)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from forensics.contract import GATEWAY_SCHEMA
from forensics.simulate import writer

STARTED = 1_787_785_200_000_000  # 2026-08-26 23:00:00 UTC, in microseconds: the nodes' start-up lines
T0 = np.datetime64("2026-08-27T00:00:00", "us")  # the traffic's time 0
T0_US = int(T0.astype(np.int64))
OPS = ["alloc", "free", "write", "read", "share", "transfer"]
ALLOC, FREE, WRITE, READ, SHARE, TRANSFER = range(6)
ACCOUNTS = 5000  # acct-00000 ... acct-04999, Zipf-drawn
MODEL_PATH = "zai-org/GLM-5.3"


def startup_log(role: str, pool: int, ps: int, context: int, tp_size: int, max_running_requests: int = 64) -> str:
    """A node's server.log: the simulator's start-up lines (forensics.simulate.writer) for this pool."""
    msgs = writer.startup_messages(role, pool, MODEL_PATH, context, ps, tp_size, max_running_requests)
    return writer.server_log([(STARTED, m) for m in msgs], True, "TP0")


def write_startup_logs(
    bundle: Path, nodes: list[tuple[str, str, int]], ps: int, context: int, max_running: int
) -> None:
    """engine/<node>/server.log for each (name, role, pool), tensor parallel over 8 GPUs."""
    for name, role, pool in nodes:
        d = bundle / "engine" / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "server.log").write_text(startup_log(role, pool, ps, context, tp_size=8, max_running_requests=max_running))


def strings(codes: np.ndarray, values: list[str]) -> pa.Array:
    """Small-int codes -> string array (null where code < 0), without Python objects per row."""
    codes = np.asarray(codes, dtype=np.int32)
    mask = codes < 0
    arr = pa.DictionaryArray.from_arrays(
        pa.array(np.where(mask, 0, codes), pa.int32(), mask=mask if mask.any() else None), pa.array(values)
    )
    return arr.cast(pa.string())


class Gateway:
    """gateway/gateway.parquet's records, request by request in arrival order: request ids req-000000000
    onwards, Zipf-drawn accounts, one token, address, agent and model for all."""

    def __init__(self, pre_names: list[str], dec_names: list[str]) -> None:
        self.pre_names, self.dec_names = pre_names, dec_names
        self.accounts = pa.array([f"acct-{a:05d}" for a in range(ACCOUNTS)])

    def table(
        self,
        ts_us: np.ndarray,
        k: np.ndarray,
        acct: np.ndarray,
        status: np.ndarray,
        prompt: np.ndarray,
        completion: np.ndarray,
        duration_ms: np.ndarray,
        room: np.ndarray,
        pn: np.ndarray,
        dn: np.ndarray,
    ) -> pa.Table:
        """The records of requests k (ts_us: microseconds after T0; status int32)."""
        n = len(k)
        return pa.Table.from_arrays(
            [
                pa.array(T0 + ts_us.astype("timedelta64[us]"), pa.timestamp("us", tz="UTC")),
                pc.binary_join_element_wise("req-", pc.utf8_lpad(pc.cast(pa.array(k), pa.string()), 9, "0"), ""),
                self.accounts.take(pa.array(acct)),
                strings(np.zeros(n), ["tok"]),
                strings(np.zeros(n), ["203.0.113.9"]),
                strings(np.zeros(n), ["bench"]),
                strings(np.zeros(n), ["glm-5.3"]),
                pa.array(status),
                pa.array(prompt),
                pa.array(completion),
                pa.array(duration_ms),
                pa.array(room),
                strings(pn, self.pre_names),
                strings(dn, self.dec_names),
            ],
            schema=GATEWAY_SCHEMA,
        )
