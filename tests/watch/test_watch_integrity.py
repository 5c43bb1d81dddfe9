"""The engines' integrity lines alerted at once by forensics watch: every fixture line of
tests/data/integrity_lines (README there: the source of each), one alert per slot, room, request or peer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from forensics.watch import run

DATA = Path(__file__).parents[1] / "data" / "integrity_lines"


def test_each_integrity_line_is_alerted_once_per_what_it_names(tmp_path: Path) -> None:
    for node, name in (("decode-0", "sglang_decode.log"), ("vllm-d", "vllm_nixl.log")):
        (tmp_path / "engine" / node).mkdir(parents=True)
        shutil.copy(DATA / name, tmp_path / "engine" / node / "server.log")
    alerts = tmp_path / "alerts.jsonl"
    run(tmp_path, once=True, alerts=alerts)
    got = [json.loads(x) for x in alerts.read_text().splitlines()]
    keys = [(a["kind"], a["node"], a["room"], a["evidence"][0]["line"]) for a in got]
    assert sorted(keys) == sorted(
        [
            # slot 17 twice (lines 1 and 10): one alert; slots 1 and 61390
            ("canary_violation", "decode-0", None, 1),
            ("canary_violation", "decode-0", None, 8),
            ("canary_violation", "decode-0", None, 9),
            # room 99 on two ranks: one alert
            ("checksum_mismatch", "decode-0", 99, 11),
            # two peers
            ("mooncake_failure", "decode-0", None, 13),
            ("mooncake_failure", "decode-0", None, 14),
            ("nixl_failure", "vllm-d", None, 1),
            ("nixl_failure", "vllm-d", None, 2),
            ("nixl_expired", "vllm-d", None, 3),
            ("nixl_expired", "vllm-d", None, 4),
            ("nixl_expired", "vllm-d", None, 5),
            ("nixl_expired", "vllm-d", None, 6),
            ("nixl_expired", "vllm-d", None, 7),
        ]
    )
    by_line = {(a["node"], a["evidence"][0]["line"]): a for a in got}
    canary = by_line[("decode-0", 1)]
    assert canary["log_time"] == "2026-09-09T10:15:02.000000Z"
    assert "slot 17 position 42 held KV other than what its holder wrote, at that read" in canary["summary"]
    assert "whose KV it was, the line does not say" in canary["summary"]
    assert by_line[("vllm-d", 1)]["request_ids"] == ["test_transfer_setup_failed_req"]
    assert by_line[("decode-0", 11)]["request_ids"] == ["d-9"]
