"""`python -m forensics.sglang serve ARGS...`: SGLang's launch_server with the plugin's hooks applied
first, for releases without sglang.srt.plugins (0.4.9, 0.5.4; python/sglang/launch_server.py runs
`launch_server(prepare_server_args(argv))`).

What it hooks: the patches are applied in the launcher's own process only. SGLang starts its
scheduler, detokenizer and (in PD mode) transfer workers with multiprocessing's spawn method, and a
spawned child imports sglang afresh: the patched classes of the parent are not the child's, and no
hook runs there. On 0.4.9 and 0.5.4 the launcher therefore records only what the launching process
itself allocates, which in a stock server is nothing; a scheduler process is hooked only where the
plugin framework runs load_plugins() in it (0.5.11+: use the entry point, not the launcher), or where a
deployment imports forensics.sglang and calls targets.apply_direct() in the scheduler process itself
(for example from a sitecustomize.py on the scheduler's PYTHONPATH with KVF_SGLANG_DIR set). The
launcher exports KVF_SGLANG_LAUNCHER=1 for such a sitecustomize to test.
`python -m forensics.sglang check [--cpu]` prints which hooks resolve on the installed release and why the
others do not (--cpu: with the stubs the CPU tests use for torchvision and sglang.srt.configs).
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str]) -> int:
    from forensics.sglang import config, hooks, targets

    if not argv or argv[0] not in ("serve", "check"):
        print(
            "usage: python -m forensics.sglang serve <sglang.launch_server arguments> | check [--cpu]", file=sys.stderr
        )
        return 2
    if argv[0] == "check":
        try:
            if "--cpu" in argv[1:]:  # the CPU tests' stubs: torchvision, sglang.srt.configs
                from forensics.sglang.cpu import import_sglang

                import_sglang()
            import sglang
        except Exception as err:  # noqa: BLE001
            print(f"sglang does not import here: {type(err).__name__}: {err} (--cpu stubs torchvision)")
            return 1
        targets._resolved()
        print(f"sglang {sglang.__version__}")
        for p in targets.APPLIED:
            print(f"  hooked  {p}")
        for p in targets.MISSING:
            why = targets.WHY.get(p)
            print(f"  absent  {p}" + (f"  (not importable here: {why})" if why else "  (not in this release)"))
        try:
            import sglang.srt.plugins.hook_registry  # noqa: F401

            print("plugin framework: yes (the entry point sglang.srt.plugins: kv_forensics registers these)")
        except ImportError:
            print("plugin framework: no (start the server with python -m forensics.sglang serve)")
        return 0
    cfg = config.load()
    if not cfg.enabled:
        print("KVF_SGLANG_DIR is not set: starting SGLang without kv-forensics", file=sys.stderr)
    else:
        hooks.configure(cfg)
        targets.apply_direct()
        os.environ["KVF_SGLANG_LAUNCHER"] = "1"
    from sglang.srt.entrypoints.http_server import launch_server
    from sglang.srt.server_args import prepare_server_args

    launch_server(prepare_server_args(argv[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
