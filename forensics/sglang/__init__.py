"""KV Forensics for SGLang: page events for the evidence bundle and a KV integrity guard.

`register` is the entry point of the group `sglang.srt.plugins` (pyproject.toml): SGLang 0.5.11+ calls
it from load_plugins() in every process (python/sglang/srt/plugins/__init__.py). It does nothing
unless KVF_SGLANG_DIR is set (forensics.sglang.config). Releases without the plugin framework start
the server through `python -m forensics.sglang serve ...` (forensics.sglang.__main__).
"""

from __future__ import annotations

import logging

log = logging.getLogger("forensics.sglang")


def register() -> None:
    from forensics.sglang import config, hooks, targets

    cfg = config.load()
    if not cfg.enabled:
        return
    hooks.configure(cfg)
    applied = targets.register_with_sglang()
    log.info("kv-forensics: %d hooks registered, page events to %s/pages (guard: %s)", len(applied), cfg.dir, cfg.guard)
