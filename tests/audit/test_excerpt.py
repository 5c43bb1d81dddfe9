"""Issue #37: an engine recognised by its own message. vLLM's out-of-memory error pasted as an excerpt of
a few lines, with no banner and no record prefix, broken anywhere (at a space, inside a word, inside a
number), audits as a pool smaller than the context: the message names the engine and the verdict by
itself. Text that names no engine stays unknown."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from forensics.audit import audit_paths

# vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory (the ValueError's text), as EngineCore
# prints it (tests/data/audit/vllm_v1_needed_error.log holds a real one)
MESSAGE = (
    "ValueError: To serve at least one request with the model's max seq len (1048576), 22.5 GiB KV cache is "
    "needed, which is larger than the available KV cache memory (17.3 GiB). Based on the available memory, the "
    "estimated maximum model length is 810208. Try increasing `gpu_memory_utilization` or decreasing "
    "`max_model_len` when initializing the engine."
)


def _audit(tmp_path: Path, pieces: list[str]):
    f = tmp_path / "excerpt.log"
    f.write_text("\n".join(pieces) + "\n")
    return audit_paths([f])[0]


def test_the_three_line_excerpt_of_the_issue(tmp_path: Path) -> None:
    a, b = MESSAGE.index("22.5 GiB"), MESSAGE.index("Based on")
    r = _audit(tmp_path, [MESSAGE[:a], MESSAGE[a:b], MESSAGE[b:]])
    assert r.verdict == "pool_smaller_than_context", r.reason
    assert "1048576" in r.reason and "810208" in r.reason


def test_every_way_of_breaking_it_in_three(tmp_path: Path) -> None:
    cuts = range(3, len(MESSAGE) - 3, 11)
    wrong = [
        (a, b)
        for a, b in itertools.combinations(cuts, 2)
        if _audit(tmp_path, [MESSAGE[:a], MESSAGE[a:b], MESSAGE[b:]]).verdict != "pool_smaller_than_context"
    ]
    assert not wrong, wrong[:5]


@pytest.mark.parametrize("pieces", [["KV cache is", "needed, says", "someone"], ["max seq len", "(1048576)"]])
def test_text_that_is_not_the_message_stays_unknown(tmp_path: Path, pieces: list[str]) -> None:
    assert _audit(tmp_path, pieces).verdict == "unknown"


# Each engine's own messages saying that its KV cache cannot hold the configured length, pasted without
# banner or record prefix: TensorRT-LLM's PyTorch backend (tensorrt_llm/_torch/pyexecutor/
# resource_manager.py, KVCacheManager.adjust_window_sizes_for_vswa: logger.warning), and LMDeploy's
# TurboMind (src/turbomind/engine/engine.cc: TM_LOG_INFO / TM_LOG_WARNING).
MESSAGES = {
    "trtllm": (
        "Adjusted window size 131072 to 8224 in blocks_per_window Adjusted max_seq_len to 8224",
        "TensorRT-LLM cut max_seq_len to 8224",
    ),
    "lmdeploy": (
        "max cached tokens: 42880 `session_len` truncated to 42880 due to limited KV cache memory",
        "LMDeploy truncated session_len to 42880",
    ),
}


@pytest.mark.parametrize("engine", sorted(MESSAGES))
def test_each_engines_message_alone_and_broken_anywhere(tmp_path: Path, engine: str) -> None:
    message, reason = MESSAGES[engine]
    whole = _audit(tmp_path, [message])
    assert (whole.engine, whole.verdict) == (engine, "pool_smaller_than_context") and reason in whole.reason
    wrong = [
        cut
        for cut in range(3, len(message) - 3)
        if (r := _audit(tmp_path, [message[:cut], message[cut:]])).verdict != "pool_smaller_than_context"
        or r.engine != engine
    ]
    assert not wrong, wrong[:5]
