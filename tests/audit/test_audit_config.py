"""Config audit: KV pool size against context length, from engine startup logs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.audit import OK, TOO_SMALL, UNKNOWN, ServerAudit, audit_engine_dirs, audit_paths
from forensics.audit.lines import clean, logical_lines, split_prefix
from forensics.engines.sglang import max_req_input_len
from forensics.errors import InputError
from tests import support

DATA = support.DATA / "audit"
SPEC_ENGINE = support.EXAMPLE / "bundle" / "engine"
ROOT = support.ROOT
CLI = ROOT / ".venv" / "bin" / "forensics"


def one(name: str, context_length: int | None = None) -> ServerAudit:
    audits = audit_paths([DATA / name], context_length=context_length)
    assert len(audits) == 1
    return audits[0]


def run_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    cmd = [str(CLI)] if CLI.exists() else [sys.executable, "-m", "forensics"]
    return subprocess.run([*cmd, "audit-config", *map(str, args)], capture_output=True, text=True, cwd=ROOT)


# --- line handling -------------------------------------------------------------------------------


def test_prefixes_give_ranks_and_message() -> None:
    assert split_prefix("[2026-03-25 09:32:19.123 DP1 TP3] KV Cache is allocated.")[:2] == (
        "KV Cache is allocated.",
        "DP1 TP3",
    )
    assert split_prefix("[2026-03-25 09:32:19 PP0 TP1 EP1] x")[1] == "PP0 TP1 EP1"
    msg, rank, found = split_prefix(
        "2026-02-19T23:56:55.123456789Z (EngineCore_DP0 pid=123) INFO 02-19 23:56:55 [file.py:524] GPU KV"
    )
    assert (msg, rank, found) == ("GPU KV", "DP0", True)
    assert split_prefix("INFO 02-19 23:56:55 file.py:524] hello")[0] == "hello"
    assert split_prefix("KV Cache is allocated. #tokens: 5")[2] is False


def test_ansi_and_control_characters_removed() -> None:
    assert clean("\x1b[32m[2026-01-01 00:00:00]\x1b[0m \x1b[1mhi\x1b[0m\x00") == "[2026-01-01 00:00:00] hi"
    assert clean("\\u001b[31mred\\u001b[0m") == "red"


def test_wrapped_server_args_and_scheduler_line_are_joined() -> None:
    audit = one("sglang_ansi_wrapped.log")
    # role and page size sit in later physical pieces of the wrapped server_args line
    assert (audit.role, audit.page_size) == ("decode", 64)
    # the scheduler line is split inside the number "163|840"
    assert audit.context_len == 163840
    assert audit.verdict == OK
    assert {r["rank"] for r in audit.ranks} == {"TP0", "TP1"}
    assert any(e.line == 1 and "server_args=" in e.text for e in audit.evidence)


def test_short_unprefixed_line_is_not_joined() -> None:
    data = [b"[2026-01-01 00:00:00] # GPU blocks: 10\n", b"100%|####| 5/5\n"]
    lines = list(logical_lines("f", data))
    assert [ln.text for ln in lines] == ["# GPU blocks: 10", "100%|####| 5/5"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=20))
def test_arbitrary_bytes_never_raise(chunks: list[bytes]) -> None:
    lines = list(logical_lines("f", chunks))
    assert all(ln.line >= 1 and "\x00" not in ln.text for ln in lines)


def test_binary_garbage_and_non_utf8(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(
        b"\x00\xff\xfe\x89PNG\r\n\x1a\n\xde\xad\xbe\xef\n"
        b"[2026-03-25 09:32:19] KV Cache is allocated. #tokens: 9000, K size: 0.6 GB, "
        b"V size: 0.6 GB \xe9\xff\n"
        b"\xc3\x28 garbage \x00\x00\n"
        b"[2026-03-25 09:32:19] max_total_num_tokens=9000, chunked_prefill_size=4096, "
        b"max_prefill_tokens=16384, "
        b"max_running_requests=64, context_len=8192, available_gpu_mem=1.00 GB\n"
    )
    audit = audit_paths([log])[0]
    assert (audit.engine, audit.pool_tokens, audit.context_len, audit.verdict) == ("sglang", 9000, 8192, OK)
    # physical lines: 1 "..PNG\r", 2 "\x1a", 3 "\xde..", 4 the pool, 5 garbage, 6 the scheduler line
    assert [e.line for e in audit.evidence] == [6]
    assert [p["line"] for p in audit.ranks[0]["pools"]] == [4, 6]


# --- SGLang --------------------------------------------------------------------------------------


def test_sglang_21395_block_fits() -> None:
    audit = one("sglang_21395.log")
    assert (audit.engine, audit.role, audit.pool_tokens, audit.context_len) == (
        "sglang",
        "unified",
        105600,
        40960,
    )
    assert audit.max_req_input_len == 40954
    assert audit.verdict == OK and audit.context_source == "log"


def test_sglang_30233_pd_pair_leak_window() -> None:
    audits = {a.node: a for a in audit_paths([DATA / "pd_30233"])}
    pre, dec = audits["prefill-0"], audits["decode-0"]
    assert (pre.role, pre.pool_tokens, pre.context_len, pre.page_size) == ("prefill", 284928, 1048576, 64)
    assert pre.verdict == TOO_SMALL and pre.max_req_input_len == 284922
    assert "284922 + 6 < context 1048576" in pre.reason
    assert any("Input length (284937 tokens)" in e.text and e.line == 10 for e in pre.evidence)
    assert (dec.role, dec.verdict, dec.max_req_input_len) == ("decode", OK, 1048570)
    assert pre.leak_windows == dec.leak_windows
    window = pre.leak_windows[0]
    assert (window["start"], window["end"], window["empty"]) == (284922, 1048570, False)
    assert 284937 in range(window["start"], window["end"])


def test_spec_bundle_leak_window() -> None:
    audits = {a.node: a for a in audit_engine_dirs(SPEC_ENGINE)}
    assert set(audits) == {"prefill-0", "decode-0"}
    pre, dec = audits["prefill-0"], audits["decode-0"]
    assert (pre.pool_tokens, pre.max_req_input_len, pre.verdict) == (4096, 4090, TOO_SMALL)
    assert (dec.pool_tokens, dec.context_len, dec.max_req_input_len, dec.verdict) == (8192, 8192, 8186, OK)
    assert pre.leak_windows == [
        {
            "prefill": str(SPEC_ENGINE / "prefill-0"),
            "decode": str(SPEC_ENGINE / "decode-0"),
            "context_len": 8192,
            "start": 4090,
            "end": 8186,
            "empty": False,
        }
    ]
    assert max_req_input_len(8192, 4096) == 4090 and max_req_input_len(8192, 8192) == 8186


def test_no_leak_window_when_prefill_pool_is_larger(tmp_path: Path) -> None:
    for node, mode, pool in (("p", "prefill", 9000), ("d", "decode", 8192)):
        (tmp_path / node).mkdir()
        (tmp_path / node / "server.log").write_text(
            "[2026-01-01 00:00:00] server_args=ServerArgs(context_length=8192, "
            f"disaggregation_mode='{mode}')\n"
            f"[2026-01-01 00:00:01] max_total_num_tokens={pool}, chunked_prefill_size=1, "
            "max_prefill_tokens=1, "
            "max_running_requests=1, context_len=8192, available_gpu_mem=1.00 GB\n"
        )
    audits = audit_engine_dirs(tmp_path)
    assert [a.verdict for a in audits] == [OK, OK]
    assert audits[0].leak_windows[0]["empty"] is True
    assert audits[0].leak_windows[0]["start"] == audits[0].leak_windows[0]["end"] == 8186


def test_sglang_ranks_disagree_smallest_decides() -> None:
    audit = one("sglang_ranks_disagree.log")
    pools = {r["rank"]: r["pool_tokens"] for r in audit.ranks}
    assert pools == {"DP0 TP0": 150000, "DP0 TP1": 150000, "DP1 TP2": 150000, "DP1 TP3": 120000}
    assert (audit.pool_tokens, audit.verdict) == (120000, TOO_SMALL)
    assert "DP1 TP3" in audit.reason and audit.max_req_input_len == 119994
    assert any(e.line == 5 for e in audit.evidence)


def test_sglang_swa_full_pool_binds() -> None:
    audit = one("sglang_swa.log")
    # the SWA pool (400000) would hold the context; the full-attention pool (100000) does not
    assert (audit.pool_tokens, audit.context_len, audit.verdict) == (100000, 131072, TOO_SMALL)
    tp0 = next(r for r in audit.ranks if r["rank"] == "TP0")
    assert tp0["binding"] == "full_layer_tokens" and len(tp0["pools"]) == 4


def test_sglang_second_unlabeled_pool_does_not_bind() -> None:
    audit = one("sglang_draft.log")  # target 70000 then a draft worker's 30000 on the same rank
    assert (audit.pool_tokens, audit.verdict) == (70000, OK)
    kinds = [p["kind"] for p in audit.ranks[0]["pools"]]
    assert "kv (second pool on this rank)" in kinds


def test_sglang_labeled_draft_pool_does_not_rescue() -> None:
    audit = one("sglang_labeled_draft.log")  # 0.5.23 format, target 50000 < 65536, draft 300000
    assert (audit.pool_tokens, audit.verdict, audit.page_size) == (50000, TOO_SMALL, 16)


def test_sglang_cut_log_is_unknown_never_guessed() -> None:
    audit = one("sglang_cut.log")
    assert (audit.verdict, audit.pool_tokens, audit.context_len) == (UNKNOWN, None, 32768)
    assert "no KV pool line" in audit.reason
    assert one("sglang_cut.log", context_length=1000).verdict == UNKNOWN


def test_sglang_unprefixed_custom_format_and_pool_warning() -> None:
    audit = one("sglang_custom_format.log")  # the incident: 681,280-token pool, context 1,048,576
    assert (audit.role, audit.pool_tokens, audit.context_len, audit.verdict) == (
        "prefill",
        681280,
        1048576,
        TOO_SMALL,
    )
    assert "KV pool holds 681280" in audit.reason and audit.max_req_input_len == 681274


def test_sglang_overlength_line_needs_a_context() -> None:
    bare = one("sglang_overlength_only.log")
    assert bare.verdict == UNKNOWN and bare.max_req_input_len == 284922
    with_ctx = one("sglang_overlength_only.log", context_length=1048576)
    assert (with_ctx.verdict, with_ctx.pool_tokens, with_ctx.context_source) == (
        TOO_SMALL,
        284928,
        "--context-length",
    )
    # M + 6 == context: the context, not the pool, was the limit; nothing is proven
    assert one("sglang_overlength_only.log", context_length=284928).verdict == UNKNOWN


def test_sglang_restart_audits_last_start_only() -> None:
    audit = one("sglang_restarted.log")
    assert (audit.pool_tokens, audit.verdict) == (90000, OK)
    assert any("2 server starts" in n for n in audit.notes)


def test_context_length_option_does_not_override_log() -> None:
    audit = one("sglang_21395.log", context_length=999999)
    assert (audit.context_len, audit.context_source, audit.verdict) == (40960, "log", OK)
    assert any("ignored" in n for n in audit.notes)


# --- vLLM ----------------------------------------------------------------------------------------


def test_vllm_v1_ok_with_separators_and_docker_prefix() -> None:
    audit = one("vllm_v1_ok.log")
    assert (audit.engine, audit.pool_tokens, audit.context_len) == ("vllm", 1234567, 32768)
    assert (audit.max_concurrency, audit.verdict) == (37.68, OK)
    assert audit.model == "Qwen/Qwen3-8B"


def test_vllm_concurrency_beats_token_count() -> None:
    low = one("vllm_v1_hybrid_low.log")  # 300,000 tokens > 262,144 but 0.85x
    assert (low.verdict, low.max_concurrency) == (TOO_SMALL, 0.85)
    high = one("vllm_v1_hybrid_ok.log")  # 200,000 tokens < 262,144 but 2.41x (hybrid model)
    assert (high.verdict, high.pool_tokens, high.context_len) == (OK, 200000, 262144)


def test_vllm_dp_ranks_disagree() -> None:
    audit = one("vllm_dp_disagree.log")
    assert {r["rank"]: r["concurrency"] for r in audit.ranks} == {"DP0": 1.2, "DP1": 0.95}
    assert (audit.pool_tokens, audit.verdict) == (124518, TOO_SMALL)


def test_vllm_v1_needed_memory_error() -> None:
    audit = one("vllm_v1_needed_error.log")
    assert (audit.verdict, audit.context_len, audit.pool_tokens) == (TOO_SMALL, 262144, None)
    assert "87840" in audit.reason


def test_vllm_needed_error_pasted_over_three_lines_gives_the_same_verdict() -> None:
    # the message of vllm/v1/core/kv_cache_utils.py as a user pastes it: wrapped at word breaks, the
    # spaces at the breaks lost, the continuation lines without a record prefix
    audit = one("vllm_v1_needed_error_wrapped.log")
    assert (audit.verdict, audit.context_len, audit.pool_tokens) == (TOO_SMALL, 262144, None)
    assert "87840" in audit.reason


def test_vllm_v0_max_seq_len_error_and_default_block_size() -> None:
    audit = one("vllm_v0_error.log")
    # the proof is vLLM's own error (32768 tokens) and its 0.25x, not the assumed 2048 x 16
    assert (audit.verdict, audit.pool_tokens, audit.context_len, audit.page_size) == (
        TOO_SMALL,
        32768,
        131072,
        None,
    )
    assert any(e.line == 9 and "max seq len (131072)" in e.text for e in audit.evidence)
    assert audit.derivation is not None and audit.derivation.assumed
    assert "assumed: 2048 blocks x 16 tokens per block = 32768 tokens" in audit.reason


def test_vllm_v0_block_size_from_log() -> None:
    audit = one("vllm_v0_blocksize_ok.log")  # '# cuda blocks: 4096' with block_size=32
    assert (audit.pool_tokens, audit.page_size, audit.verdict) == (131072, 32, OK)
    assert "derived: 4096 blocks x 32 tokens per block = 131072 tokens" in audit.reason


def test_vllm_assumed_block_size_proves_nothing() -> None:
    # 1000 blocks x 16 (vLLM's default; the log has no block_size) >= max_seq_len 8192, and no
    # concurrency line: with a real block size of 8 the pool would be 8000 < 8192, so no fit is proven
    audit = one("vllm_v0_default_block.log")
    assert (audit.pool_tokens, audit.context_len, audit.page_size, audit.verdict) == (None, 8192, None, UNKNOWN)
    assert "assumed: 1000 blocks x 16 tokens per block = 16000 tokens" in audit.reason
    assert "vLLM's default" in audit.reason and "derived:" not in audit.reason
    assert audit.ranks[0]["pool_tokens"] == 16000 and audit.ranks[0]["derivation"].startswith("assumed: ")


def test_vllm_rounded_concurrency_falls_back_to_tokens(tmp_path: Path) -> None:
    log = tmp_path / "v.log"
    log.write_text(
        "(EngineCore_DP0 pid=1) INFO 01-01 00:00:00 [kv_cache_utils.py:1] GPU KV cache size: 8,190 tokens\n"
        "(EngineCore_DP0 pid=1) INFO 01-01 00:00:00 [kv_cache_utils.py:2] "
        "Maximum concurrency for 8,192 tokens per request: 1.00x\n"
    )
    assert audit_paths([log])[0].verdict == TOO_SMALL


# --- TensorRT-LLM and LMDeploy -------------------------------------------------------------------


def test_trtllm_ok() -> None:
    audit = one("trtllm_ok.log")
    assert (audit.engine, audit.pool_tokens, audit.context_len, audit.page_size, audit.verdict) == (
        "trtllm",
        220480,
        131072,
        64,
        OK,
    )


def test_trtllm_adjusted_max_seq_len_is_a_proof() -> None:
    audit = one("trtllm_adjusted.log")
    assert (audit.pool_tokens, audit.context_len, audit.verdict) == (8224, 131072, TOO_SMALL)
    assert "cut max_seq_len to 8224" in audit.reason


def test_trtllm_context_from_option() -> None:
    assert one("trtllm_no_context.log").verdict == UNKNOWN
    small = one("trtllm_no_context.log", context_length=32768)
    assert (small.verdict, small.pool_tokens, small.context_source) == (TOO_SMALL, 16384, "--context-length")
    assert one("trtllm_no_context.log", context_length=8192).verdict == OK


def test_lmdeploy_truncated_session_len() -> None:
    audit = one("lmdeploy_truncated.log")
    assert (audit.engine, audit.pool_tokens, audit.context_len, audit.verdict) == (
        "lmdeploy",
        42880,
        196608,
        TOO_SMALL,
    )


def test_lmdeploy_block_manager() -> None:
    audit = one("lmdeploy_blocks_ok.log")  # 159 blocks x cache_block_seq_len 128; block_size=64 MB is bytes
    assert (audit.pool_tokens, audit.context_len, audit.page_size, audit.verdict) == (20352, 2056, 128, OK)


def test_lmdeploy_blocks_without_block_length_is_unknown(tmp_path: Path) -> None:
    log = tmp_path / "tm.log"
    log.write_text("[TM][INFO] [BlockManager] block_size = 64 MB\n[TM][INFO] [BlockManager] max_block_count = 159\n")
    audit = audit_paths([log], context_length=2048)[0]
    assert (audit.engine, audit.pool_tokens, audit.verdict) == ("lmdeploy", None, UNKNOWN)


def test_unknown_engine() -> None:
    audit = one("unknown_engine.log")
    assert (audit.engine, audit.verdict) == ("unknown", UNKNOWN)
    assert "not recognised" in audit.reason


# --- pools derived from blocks x block size ---------------------------------------------------


def write_log(tmp_path: Path, lines: list[str]) -> Path:
    log = tmp_path / "server.log"
    log.write_text("".join(f"{ln}\n" for ln in lines))
    return log


def derived_audit(log: Path, context_length: int | None = None) -> ServerAudit:
    """The audit of `log`, checked to rest on a pool derived from two logged factors."""
    audit = audit_paths([log], context_length=context_length)[0]
    d = audit.derivation
    assert d is not None and not d.assumed
    assert audit.pool_tokens == d.blocks * d.block_size
    assert d.describe() in audit.reason and audit.reason.count("derived: ") == 1
    cited = {(e.file, e.line) for e in audit.evidence}
    assert d.size_evidence is not None
    assert {(d.blocks_evidence.file, d.blocks_evidence.line), (d.size_evidence.file, d.size_evidence.line)} <= cited
    return audit


# vLLM 0.4.x: `args: Namespace(..)` from vllm/entrypoints/openai/api_server.py, `# GPU blocks: %d,
# # CPU blocks: %d` from vllm/executor/gpu_executor.py (no concurrency line in that version)
def vllm_v0(gpu_blocks: int) -> list[str]:
    return [
        "INFO 03-01 08:00:01 api_server.py:219] vLLM API server version 0.4.2",
        "INFO 03-01 08:00:01 api_server.py:220] args: Namespace(host=None, port=8000, model='m', "
        "max_model_len=32768, block_size=32, gpu_memory_utilization=0.9)",
        f"INFO 03-01 08:00:40 gpu_executor.py:45] # GPU blocks: {gpu_blocks}, # CPU blocks: 2048",
    ]


def test_vllm_derived_pool_fits_and_falls_short(tmp_path: Path) -> None:
    log = write_log(tmp_path, vllm_v0(2048))  # 2048 x 32 = 65536 >= 32768
    audit = derived_audit(log)
    assert (audit.pool_tokens, audit.context_len, audit.verdict) == (65536, 32768, OK)
    assert f"derived: 2048 blocks x 32 tokens per block = 65536 tokens (blocks: {log}:3; block size: {log}:2)" in (
        audit.reason
    )
    audit = derived_audit(write_log(tmp_path, vllm_v0(512)))  # 512 x 32 = 16384 < 32768
    assert (audit.pool_tokens, audit.verdict) == (16384, TOO_SMALL)
    assert "KV pool 16384 < context 32768" in audit.reason


def test_vllm_early_v1_bare_gpu_blocks_and_non_default_args(tmp_path: Path) -> None:
    # `non-default args: %s` (vllm/entrypoints/utils.py) and the bare `# GPU blocks: %d` of early V1
    # (vllm/v1/core/kv_cache_utils.py), whose concurrency line is missing when the log is cut
    log = write_log(
        tmp_path,
        [
            "INFO 05-01 10:00:00 [utils.py:326] non-default args: {'model': 'Qwen/Qwen3-8B', "
            "'max_model_len': 40960, 'block_size': 32}",
            "(EngineCore_0 pid=7) INFO 05-01 10:01:00 [kv_cache_utils.py:634] # GPU blocks: 1000",
        ],
    )
    audit = derived_audit(log)
    assert (audit.pool_tokens, audit.context_len, audit.verdict) == (32000, 40960, TOO_SMALL)
    assert f"(blocks: {log}:2; block size: {log}:1)" in audit.reason


def test_vllm_assumed_pool_below_context_is_no_proof(tmp_path: Path) -> None:
    lines = vllm_v0(400)  # 400 x 16 = 6400 < 32768, but 16 is only vLLM's default
    lines[1] = lines[1].replace(", block_size=32", "")
    audit = audit_paths([write_log(tmp_path, lines)])[0]
    assert (audit.pool_tokens, audit.verdict) == (None, UNKNOWN)
    assert "assumed: 400 blocks x 16 tokens per block = 6400 tokens" in audit.reason
    assert audit.derivation is not None and audit.derivation.size_evidence is None


# TensorRT-LLM C++ runtime, cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp: the primary-pool
# count and the tokens per block on two lines (as in a real log whose allocation line then reads
# `Allocated 62.99 GiB for max tokens in paged KV cache (294848)` = 4607 x 64); cut before that line
def trtllm_two_lines(primary_blocks: int) -> list[str]:
    return [
        "[TensorRT-LLM][INFO] Number of blocks in KV cache primary pool: " + str(primary_blocks),
        "[TensorRT-LLM][INFO] Number of blocks in KV cache secondary pool: 0, onboard blocks to primary "
        "memory before reuse: true",
        "[TensorRT-LLM][INFO] Max KV cache pages per sequence: 65",
        "[TensorRT-LLM][INFO] Number of tokens per block: 64.",
    ]


def test_trtllm_derived_from_primary_pool_and_tokens_per_block(tmp_path: Path) -> None:
    log = write_log(tmp_path, trtllm_two_lines(4607))
    audit = derived_audit(log, context_length=131072)
    assert (audit.pool_tokens, audit.page_size, audit.verdict) == (294848, 64, OK)
    assert f"derived: 4607 blocks x 64 tokens per block = 294848 tokens (blocks: {log}:1; block size: {log}:4)" in (
        audit.reason
    )
    small = derived_audit(log, context_length=524288)
    assert (small.pool_tokens, small.verdict) == (294848, TOO_SMALL)
    assert "KV pool 294848 < context 524288" in small.reason


def test_trtllm_stated_allocation_binds_before_the_derived_pool(tmp_path: Path) -> None:
    lines = [*trtllm_two_lines(4607), "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 62.99 GiB for max tokens "
             "in paged KV cache (294848)."]  # fmt: skip
    audit = audit_paths([write_log(tmp_path, lines)], context_length=131072)[0]
    assert (audit.pool_tokens, audit.verdict, audit.derivation) == (294848, OK, None)
    assert "derived" not in audit.reason


# TensorRT-LLM 1.2.0rc5 (PyTorch / AutoDeploy backend, trtllm-serve): the per-window line of
# kvCacheManager.cpp carries both factors; the allocation line agrees (61848 x 64 = 3958272)
def trtllm_window(primary_blocks: int) -> list[str]:
    return [
        "[TensorRT-LLM][INFO] Max KV cache blocks per sequence: 256 [window size=16384], tokens per block=64, "
        f"primary blocks={primary_blocks}, secondary blocks=0, max sequence length=16384",
        "[TensorRT-LLM][INFO] Number of tokens per block: 64.",
        f"[TensorRT-LLM][INFO] [MemUsageChange] Allocated 0.00 GiB for max tokens in paged KV cache "
        f"({primary_blocks * 64}).",
    ]


# LMDeploy TurboMind: `input backend=.., backend_config=TurbomindEngineConfig(..)` from
# lmdeploy/serve/async_engine.py, `[BlockManager] max_block_count = %d` from
# src/turbomind/models/llama/BlockManager.cc
def lmdeploy_turbomind(max_block_count: int) -> list[str]:
    return [
        "2024-06-01 10:00:01,120 - lmdeploy - INFO - async_engine.py:261 - input backend=turbomind, "
        "backend_config=TurbomindEngineConfig(dtype='auto', model_format=None, tp=1, session_len=32768, "
        "max_batch_size=8, cache_max_entry_count=0.8, cache_chunk_size=-1, cache_block_seq_len=64, "
        "enable_prefix_caching=False, quant_policy=0)",
        "[TM][INFO] [BlockManager] block_size = 64 MB",
        f"[TM][INFO] [BlockManager] max_block_count = {max_block_count}",
        "[TM][INFO] [BlockManager] chunk_size = 1",
    ]


@pytest.mark.parametrize(
    "build, blocks, size, context, block_line, small",
    [
        (trtllm_window, 61848, 64, 16384, 1, 200),  # the window line gives both factors; 200 x 64 < 16384
        (lmdeploy_turbomind, 600, 64, 32768, 3, 159),  # 600 x 64 >= 32768; 159 x 64 < 32768
    ],
    ids=["trtllm-window-line", "lmdeploy-turbomind"],
)
def test_derived_pool_names_both_lines(
    tmp_path: Path, build: Callable[[int], list[str]], blocks: int, size: int, context: int, block_line: int, small: int
) -> None:
    log = write_log(tmp_path, build(blocks))
    audit = derived_audit(log)
    assert (audit.pool_tokens, audit.context_len, audit.verdict) == (blocks * size, context, OK)
    expected = f"derived: {blocks} blocks x {size} tokens per block = {blocks * size} tokens"
    assert f"{expected} (blocks: {log}:{block_line}; block size: {log}:1)" in audit.reason
    low = derived_audit(write_log(tmp_path, build(small)))
    assert (low.pool_tokens, low.verdict) == (small * size, TOO_SMALL)


# LMDeploy PyTorch engine: the `backend_config=PytorchEngineConfig(..)` dump (num_gpu_blocks=0: size
# from free memory), then `Building CacheEngine with config: \n{cache_config}.` from
# lmdeploy/pytorch/engine/executor/base.py, the CacheConfig dataclass of lmdeploy/pytorch/config.py
def lmdeploy_pytorch(num_gpu_blocks: int) -> list[str]:
    return [
        "2025-06-01 10:00:01,120 - lmdeploy - INFO - async_engine.py:261 - input backend=pytorch, "
        "backend_config=PytorchEngineConfig(dtype='auto', tp=1, dp=1, dp_rank=0, ep=1, session_len=32768, "
        "max_batch_size=128, cache_max_entry_count=0.8, prefill_interval=16, block_size=64, num_cpu_blocks=0, "
        "num_gpu_blocks=0, adapters=None, max_prefill_token_num=4096, thread_safe=False)",
        "2025-06-01 10:00:40,500 - lmdeploy - INFO - base.py:180 - Building CacheEngine with config: ",
        f"CacheConfig(max_batches=128, block_size=64, num_cpu_blocks=0, num_gpu_blocks={num_gpu_blocks}, "
        "window_size=-1, cache_max_entry_count=0.8, max_prefill_token_num=4096, enable_prefix_caching=False, "
        "quant_policy=0, device_type='cuda', num_state_caches=None, states_shapes=[], num_reserved_gpu_blocks=0).",
    ]


def test_lmdeploy_pytorch_derived_pool_and_auto_block_count(tmp_path: Path) -> None:
    log = write_log(tmp_path, lmdeploy_pytorch(1000))  # 1000 x 64 = 64000 >= 32768
    audit = derived_audit(log)
    # num_gpu_blocks=0 in the engine config is "auto", not a 0-token pool
    assert (audit.pool_tokens, audit.context_len, audit.verdict) == (64000, 32768, OK)
    assert [p["tokens"] for p in audit.ranks[0]["pools"]] == [64000]
    assert audit.derivation is not None and audit.derivation.blocks_evidence.line in (2, 3)
    small = derived_audit(write_log(tmp_path, lmdeploy_pytorch(300)))  # 300 x 64 = 19200 < 32768
    assert (small.pool_tokens, small.verdict) == (19200, TOO_SMALL)


def test_cli_says_derived_with_both_lines(tmp_path: Path) -> None:
    log = write_log(tmp_path, trtllm_two_lines(4607))
    proc = run_cli("--context-length", "131072", log)
    assert proc.returncode == 0, proc.stderr
    # an `ok` is explained too when its pool is derived
    assert f"derived: 4607 blocks x 64 tokens per block = 294848 tokens (blocks: {log}:1; block size: {log}:4)" in (
        proc.stdout
    )
    data = json.loads(run_cli("--json", "--context-length", "131072", log).stdout)[0]
    d = data["derivation"]
    assert (d["blocks"], d["block_size"], d["tokens"], d["block_size_assumed"]) == (4607, 64, 294848, False)
    assert (d["blocks_evidence"]["line"], d["block_size_evidence"]["line"]) == (1, 4)
    assert "derived: 4607 blocks" in data["reason"] and data["pool_tokens"] == 294848
    assumed = json.loads(run_cli("--json", DATA / "vllm_v0_default_block.log").stdout)[0]
    assert assumed["derivation"]["block_size_assumed"] is True and assumed["derivation"]["block_size_evidence"] is None
    assert (assumed["verdict"], assumed["pool_tokens"]) == (UNKNOWN, None)


# --- inputs and errors ---------------------------------------------------------------------------


def test_folder_of_files_is_one_server_and_empty_folder_unknown(tmp_path: Path) -> None:
    node = tmp_path / "node"
    node.mkdir()
    shutil.copy(DATA / "pd_30233" / "prefill-0" / "server.log", node / "a.log")
    (node / "b.log").write_text("[2026-02-11 14:04:41 DP7 TP7] KV Cache is allocated. #tokens: 1000, KV size: 1 GB\n")
    audits = audit_paths([node])
    assert len(audits) == 1 and audits[0].pool_tokens == 1000 and audits[0].node == "node"
    assert any(e.file.endswith("b.log") for e in audits[0].evidence)
    (tmp_path / "empty").mkdir()
    empty = audit_paths([tmp_path / "empty"])[0]
    assert empty.verdict == UNKNOWN and "no log files" in empty.reason


def test_missing_path_is_input_error() -> None:
    with pytest.raises(InputError, match="nope.log"):
        audit_paths([DATA / "nope.log"])


def test_unreadable_file_is_input_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "locked.log"
    log.write_text("x\n")

    def denied(self: Path, *args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "open", denied)
    with pytest.raises(InputError, match="locked.log"):
        audit_paths([log])


# --- the command ---------------------------------------------------------------------------------


def test_cli_exit_0_table() -> None:
    proc = run_cli(DATA / "sglang_21395.log", DATA / "trtllm_ok.log")
    assert proc.returncode == 0, proc.stderr
    header = proc.stdout.splitlines()[0].split()
    assert header[:3] == ["PATH", "ENGINE", "ROLE"] and header[-1] == "VERDICT"
    assert "105600" in proc.stdout and "Traceback" not in proc.stderr


def test_cli_exit_1_and_leak_window_in_table() -> None:
    proc = run_cli(SPEC_ENGINE)
    assert proc.returncode == 1
    assert "[4090, 8186)" in proc.stdout
    assert "pool_smaller_than_context" in proc.stdout


def test_cli_exit_2_missing_path() -> None:
    proc = run_cli(DATA / "sglang_21395.log", "/no/such/dir/server.log")
    assert proc.returncode == 2
    assert "/no/such/dir/server.log" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("Error: ")


def test_cli_exit_2_not_a_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    proc = run_cli(fifo)
    assert proc.returncode == 2 and "pipe.log" in proc.stderr


def test_cli_strict_fails_on_unknown() -> None:
    assert run_cli(DATA / "sglang_cut.log").returncode == 0
    assert run_cli("--strict", DATA / "sglang_cut.log").returncode == 1
    assert run_cli("--strict", DATA / "sglang_21395.log").returncode == 0
    proc = run_cli(DATA / "unknown_engine.log")
    assert proc.returncode == 0 and "not recognised" in proc.stdout


def test_cli_context_length_option() -> None:
    assert run_cli(DATA / "trtllm_no_context.log").returncode == 0
    proc = run_cli("--context-length", "32768", DATA / "trtllm_no_context.log")
    assert proc.returncode == 1 and "32768*" in proc.stdout


def test_cli_json_shape() -> None:
    proc = run_cli("--json", DATA / "pd_30233", DATA / "vllm_v1_ok.log")
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    assert isinstance(data, list) and len(data) == 3
    keys = {
        "path",
        "engine",
        "role",
        "pool_tokens",
        "context_len",
        "page_size",
        "max_req_input_len",
        "verdict",
        "ranks",
        "evidence",
        "leak_windows",
    }
    assert all(keys <= set(obj) for obj in data)
    by_engine = {(o["engine"], o["role"]): o for o in data}
    pre = by_engine[("sglang", "prefill")]
    assert pre["verdict"] == TOO_SMALL and pre["leak_windows"][0]["start"] == 284922
    assert all(set(e) == {"file", "line", "text"} and e["line"] >= 1 for e in pre["evidence"])
    assert {r["rank"] for r in pre["ranks"]} == {"DP0 TP0", "DP1 TP1"}
    assert by_engine[("vllm", None)]["max_concurrency"] == 37.68


def test_pool_without_context_is_unknown_for_sglang_and_vllm(tmp_path: Path) -> None:
    sg = tmp_path / "sg.log"
    sg.write_text("[2026-01-01 00:00:00 TP0] KV Cache is allocated. #tokens: 5000, KV size: 0.1 GB\n")
    vl = tmp_path / "vl.log"
    vl.write_text("(EngineCore_DP0 pid=1) INFO 01-01 00:00:00 [kv_cache_utils.py:1] GPU KV cache size: 5,000 tokens\n")
    audits = audit_paths([sg, vl])
    assert [(a.engine, a.pool_tokens, a.verdict) for a in audits] == [
        ("sglang", 5000, UNKNOWN),
        ("vllm", 5000, UNKNOWN),
    ]
    assert all("--context-length" in a.reason for a in audits)
    assert [a.verdict for a in audit_paths([sg, vl], context_length=4096)] == [OK, OK]


def test_lines_after_the_head_of_a_long_log_still_count(tmp_path: Path) -> None:
    filler = (
        "[2026-04-13 16:12:40 DP4 TP4] Decode batch, #running-req: 3, #token: 2624, token usage: 0.02, "
        "cuda graph: True, gen throughput (token/s): 36.75, #queue-req: 0\n"
    )
    log = tmp_path / "long.log"
    log.write_text(
        "[2026-01-01 00:00:00] KV cache is forced as chunk cache for decode server\n"
        + filler * 6000
        + "[2026-01-01 01:00:00 TP0] KV Cache is allocated. #tokens: 7000, KV size: 1 GB\n"
        + filler * 10
        + "[2026-01-01 01:00:00 TP0] max_total_num_tokens=7000, chunked_prefill_size=1, "
        "max_prefill_tokens=1, max_running_requests=1, context_len=8192, available_gpu_mem=1.00 GB\n"
    )
    audit = audit_paths([log])[0]
    assert (audit.role, audit.pool_tokens, audit.context_len, audit.verdict) == (
        "decode",
        7000,
        8192,
        TOO_SMALL,
    )
    # 1 the role warning, 2-6001 filler, 6002 the pool, 6003-6012 filler, 6013 the scheduler line
    assert [e.line for e in audit.evidence] == [1, 6013]


def test_a_bundle_root_audits_its_engine_nodes_only() -> None:
    # gateway/, pages/, bundle.toml and exclusions.toml are no servers: only engine/<node>/ are
    bundle = ROOT / "sample_data" / "bundle"
    proc = run_cli(bundle, "--json")
    assert proc.returncode == 1, proc.stderr  # the sample's prefill pools are smaller than the context
    servers = json.loads(proc.stdout)
    nodes = sorted(d.name for d in (bundle / "engine").iterdir() if d.is_dir())
    assert sorted(s["node"] for s in servers) == nodes
    assert all(Path(s["path"]).parent.name == "engine" for s in servers)
    assert "unknown" not in {s["verdict"] for s in servers}


def test_a_bundle_root_with_no_node_folders_is_refused(tmp_path: Path) -> None:
    (tmp_path / "engine").mkdir()
    (tmp_path / "bundle.toml").write_text("")
    proc = run_cli(tmp_path)
    assert proc.returncode == 2
    assert f"{tmp_path / 'engine'}: no node folders" in proc.stderr and "Traceback" not in proc.stderr
