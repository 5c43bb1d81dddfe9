"""The SGLang plugin's tests run in their own virtual environment (make test-sglang: SGLang's wheel on
CPU torch, scripts/sglang_test_venv.sh). Where SGLang is not installed (the project's own venv) they
are skipped with that reason; under make test-sglang (KVF_SGLANG_REQUIRED=1) a failing import is an
error, never a skip."""

from __future__ import annotations

import csv
import logging
import os
from pathlib import Path
from typing import Any

import pytest

REQUIRED = os.environ.get("KVF_SGLANG_REQUIRED") == "1"


def need_sglang() -> None:
    try:  # with the stubs the driver puts in place of torchvision (forensics.sglang.cpu.import_sglang)
        from forensics.sglang.cpu import import_sglang

        import_sglang()
    except ImportError as err:
        if REQUIRED:
            raise
        pytest.skip(f"SGLang is not installed here ({err}): make test-sglang runs these", allow_module_level=True)


# a few hundred requests with the placeholder path and aborts well represented (the default preset's
# rates would leave a handful); page_size 1: SGLang's TokenToKVPoolAllocator (tests/support/sglang_drive.py)
MIX = dict(requests=120, page_size=1, long_rate=0.08, abort_rate=0.05)


def simulate_driven(out: Path, seed: int, page_size: int = 1, **kw: Any) -> dict[str, Any]:
    from forensics.simulate.config import build_config
    from tests.support import sglang_drive as drive

    logging.getLogger("forensics.sglang").setLevel(logging.CRITICAL)  # one line per alert otherwise
    return drive.run(out, build_config("default", seed=seed, **{**MIX, "page_size": page_size}), **kw)


def truth_rows(out: Path, name: str) -> list[dict[str, str]]:
    with (out / "truth" / name).open() as fh:
        return list(csv.DictReader(fh))


def exposed_rooms(out: Path) -> set[int]:
    return {int(r["room"]) for r in truth_rows(out, "responses.csv") if r["exposed"] == "1"}
