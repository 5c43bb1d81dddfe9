"""The SIEM tests' shared fixture: an output folder and an alerts file with hostile values everywhere."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from tests.siem.test_siem import ALERTS, HOSTILE, HOSTILE_UA, read_csv


@pytest.fixture()
def hostile_out(tmp_path: Path, sample_out: Path) -> tuple[Path, Path]:
    """An output folder whose findings, and an alerts file whose alerts, carry hostile values everywhere."""
    out = tmp_path / "hostile"
    out.mkdir()
    shutil.copy(sample_out / "manifest.json", out / "manifest.json")
    rows = read_csv(sample_out / "affected_responses.csv")[:3]
    for r in rows:
        r.update(account_id=HOSTILE, cohort=HOSTILE, decode_node="decode|0=\\\n", reason=HOSTILE_UA)
    with (out / "affected_responses.csv").open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    with (out / "exposures.csv").open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["recipient_request_id", "source_request_id", "recipient_account_id", "source_account_id"])
        w.writerow([rows[0]["request_id"], "req-x", HOSTILE, HOSTILE_UA])
    alerts = tmp_path / "alerts.jsonl"
    lines = [json.loads(x) for x in ALERTS.read_text().splitlines()]
    for a in lines:
        a["node"] = "decode|0=\\\n"
        a["summary"] = HOSTILE_UA
        a["evidence"].append({"file": "engine/x|=\\\n.log", "line": 7, "text": HOSTILE_UA})
    lines[0]["kind"] = "exposure|x=y\\\n"
    alerts.write_text("".join(json.dumps(a) + "\n" for a in lines))
    return out, alerts
