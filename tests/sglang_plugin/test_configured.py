"""A configured server's first allocator call makes the process's runtime from the settings (the path
SGLang takes after register(): no driver installs a runtime there), with the ledger sized to the pool."""

from __future__ import annotations

from pathlib import Path

from tests.sglang_plugin.conftest import need_sglang

need_sglang()


def test_the_first_allocation_makes_the_runtime_from_the_settings(tmp_path: Path) -> None:
    from forensics.sglang import config, hooks
    from forensics.sglang.cpu import import_sglang

    sg = import_sglang()
    old = sg.sglang.__version__.startswith("0.4.")
    alloc = sg.A.TokenToKVPoolAllocator(4096, sg.torch.float16, "cpu", None, *(() if old else (False,)))
    hooks.install(None)
    hooks.configure(config.load({"KVF_SGLANG_DIR": str(tmp_path), "KVF_SGLANG_NODE": "decode-7"}))
    try:
        out = hooks.h_alloc(type(alloc).alloc, alloc, 8)
        rt = hooks.runtime()
        assert out is not None and rt is not None
        assert (rt.node, rt.ps, rt.guard) == ("decode-7", 1, "observe")
        assert len(rt.holder) > 4096 and rt.fresh[out.numpy()].all()
        assert rt.alerts_path == tmp_path / "alerts.jsonl" and rt.rec is not None
        assert rt.rec.dir == tmp_path / "pages"
        rt.rec.close()
    finally:
        hooks.install(None)
        hooks.configure(None)  # type: ignore[arg-type]
