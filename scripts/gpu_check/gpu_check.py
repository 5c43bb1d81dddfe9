#!/usr/bin/env python3
"""Check the kv-forensics SGLang plugin on one GPU: a real prefill/decode pair, the plugin on in both,
a seeded mix of normal, over-length and aborted requests, then the evidence bundle and investigate.

    python scripts/gpu_check/gpu_check.py                 # observe mode, page size 16
    python scripts/gpu_check/gpu_check.py --guard enforce --page-size 1 --keep
    python scripts/gpu_check/gpu_check.py --dry-run       # print every command, start nothing
    python scripts/gpu_check/gpu_check.py --replay RUN    # bundle + investigate on a kept run folder

Run it with the Python of the environment that has SGLang (0.5.11 or later: the plugin loads through
load_plugins()) and kv-forensics installed (`pip install -e .` in this repository: the entry point
`sglang.srt.plugins: kv_forensics` exists only for an installed package). Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bundle import CheckError, assemble, figures, investigate, investigate_cmd  # noqa: E402
from plan import (  # noqa: E402
    DECODE,
    PREFILL,
    Settings,
    kvf_dir,
    log_path,
    plan_json,
    plan_requests,
    router_cmd,
    server_cmd,
    server_env,
    write_model,
)

# What the server's Python has: printed as JSON by `python -c PROBE` (a child, so --python may name
# another environment than the one running this script).
PROBE = r"""
import importlib.util as u, json, os, sys
d = {"python": sys.version.split()[0]}
def has(m):
    try: return u.find_spec(m) is not None
    except Exception: return False
try:
    import sglang; d["sglang"] = sglang.__version__
except Exception as e: d["sglang_error"] = f"{type(e).__name__}: {e}"
try:
    import forensics; d["forensics"] = os.path.dirname(forensics.__file__)
except Exception as e: d["forensics_error"] = f"{type(e).__name__}: {e}"
try:
    from importlib.metadata import entry_points
    d["entry_point"] = [ep.value for ep in entry_points(group="sglang.srt.plugins") if ep.name == "kv_forensics"]
except Exception as e: d["entry_point"] = []
d["plugins_env"] = os.environ.get("SGLANG_PLUGINS")
d["mooncake"] = has("mooncake.engine") or has("mooncake")
d["router"] = has("sglang_router")
try:
    from sglang.srt.environ import envs; d["mooncake_protocol_env"] = hasattr(envs, "MOONCAKE_PROTOCOL")
except Exception: d["mooncake_protocol_env"] = False
try: d["ib_devices"] = sorted(os.listdir("/sys/class/infiniband"))
except OSError: d["ib_devices"] = []
try:
    import torch
    d["cuda"] = torch.cuda.is_available()
    d["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if d["cuda"] else []
except Exception as e: d["cuda"] = False; d["torch_error"] = f"{type(e).__name__}: {e}"
print(json.dumps(d))
"""

# The installed release's own parser over the commands this check would run (no GPU needed).
CHECK_ARGS = r"""
import argparse, importlib.util, json, pathlib, sys
argvs = json.loads(sys.argv[1])
try:
    try:
        from sglang.srt.server_args import ServerArgs
    except ImportError:  # a CPU host without torchvision: the plugin's stubs (forensics.sglang check --cpu)
        from forensics.sglang.cpu import import_sglang
        import_sglang()
        from sglang.srt.server_args import ServerArgs
except ImportError as e:  # the module's imports fail here: each flag looked up in its source, by name
    src = pathlib.Path(importlib.util.find_spec("sglang").submodule_search_locations[0], "srt")
    text = "".join(f.read_text(errors="replace") for f in src.glob("**/*.py") if "args" in f.name)
    miss = sorted({a for argv in argvs for a in argv if a.startswith("--") and f'"{a}"' not in text})
    print("\n".join(f"unknown flag {a}" for a in miss) or f"ok by name (server_args does not import: {e})")
    sys.exit(0)
bad = []
for argv in argvs:
    p = argparse.ArgumentParser(exit_on_error=False)
    ServerArgs.add_cli_args(p)
    try:
        p.parse_args(argv)
    except (argparse.ArgumentError, SystemExit) as e:
        bad.append(f"{argv[argv.index('--disaggregation-mode') + 1]}: {e}")
print("\n".join(bad) or "ok")
"""


def say(msg: str) -> None:
    print(f"gpu-check: {msg}", flush=True)


def parse(argv: list[str]) -> argparse.Namespace:
    d = Settings(run=Path("."))
    ap = argparse.ArgumentParser(prog="gpu_check.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, help="run folder (default: a new folder under the temp dir)")
    ap.add_argument("--python", default=d.python, help="Python of the SGLang environment (default: this one)")
    ap.add_argument("--gpu", default=d.gpu, help="CUDA_VISIBLE_DEVICES for both servers (default 0)")
    ap.add_argument("--port-base", type=int, default=d.port_base, help="router; +100 prefill, +200 decode, ...")
    ap.add_argument("--page-size", type=int, default=d.page_size, choices=(1, 16), help="default 16")
    ap.add_argument("--guard", default=d.guard, choices=("observe", "enforce", "off"), help="default observe")
    ap.add_argument(
        "--transfer",
        default=d.transfer,
        choices=("auto", "mooncake", "fake"),
        help="auto: Mooncake where it is installed and can run here, else SGLang's fake backend",
    )
    ap.add_argument(
        "--lb",
        default=d.lb,
        choices=("client", "router"),
        help="client: this script posts to both servers as mini_lb does (default); "
        "router: sglang_router.launch_router --pd-disaggregation --mini-lb",
    )
    ap.add_argument("--requests", type=int, default=d.requests, help=f"default {d.requests}")
    ap.add_argument("--concurrency", type=int, default=d.concurrency, help=f"default {d.concurrency}")
    ap.add_argument("--seed", type=int, default=d.seed, help=f"default {d.seed}")
    ap.add_argument("--prefill-tokens", type=int, default=d.prefill_tokens, help="prefill's --max-total-tokens")
    ap.add_argument("--decode-tokens", type=int, default=d.decode_tokens, help="decode's --max-total-tokens")
    ap.add_argument("--mem-fraction", type=float, default=d.mem_fraction, help="--mem-fraction-static of each")
    ap.add_argument("--cuda-graph", action="store_true", help="keep CUDA graphs on (off by default: faster start)")
    ap.add_argument(
        "--server-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="one more launch_server argument for both servers (repeat it)",
    )
    ap.add_argument("--start-timeout", type=float, default=900.0, help="seconds a server may take to start")
    ap.add_argument("--request-timeout", type=float, default=120.0, help="seconds per request")
    ap.add_argument("--settle", type=float, default=5.0, help="seconds between the last answer and the stop")
    ap.add_argument("--stop-timeout", type=float, default=60.0, help="seconds a server may take to stop")
    ap.add_argument("--investigate-timeout", type=float, default=900.0)
    ap.add_argument("--keep", action="store_true", help="keep the run folder (logs, page files, bundle, findings)")
    ap.add_argument("--dry-run", action="store_true", help="print every command and environment, start nothing")
    ap.add_argument(
        "--check-args",
        action="store_true",
        help="parse the servers' commands with the installed SGLang's own parser, start nothing",
    )
    ap.add_argument("--replay", type=Path, metavar="RUN", help="only the bundle, investigate and figures of a kept run")
    return ap.parse_args(argv)


def settings(a: argparse.Namespace, run: Path) -> Settings:
    return Settings(
        run=run,
        python=a.python,
        gpu=a.gpu,
        port_base=a.port_base,
        page_size=a.page_size,
        guard=a.guard,
        transfer=a.transfer,
        lb=a.lb,
        requests=a.requests,
        concurrency=a.concurrency,
        seed=a.seed,
        prefill_tokens=a.prefill_tokens,
        decode_tokens=a.decode_tokens,
        mem_fraction=a.mem_fraction,
        cuda_graph=a.cuda_graph,
        extra_server_args=a.server_arg,
    )


def probe(python: str) -> dict[str, Any]:
    try:
        p = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, timeout=180, check=False)
        return dict(json.loads(p.stdout.strip().splitlines()[-1]))
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as err:
        return {"probe_error": f"{type(err).__name__}: {err}"}


def resolve_transfer(s: Settings, pr: dict[str, Any]) -> tuple[str, str]:
    """(backend, why). 0.5.11's Mooncake engine always initialises the rdma transport
    (distributed/device_communicators/mooncake_transfer_engine.py initialize); 0.5.23 takes
    MOONCAKE_PROTOCOL (environ.py), so tcp serves a host without an RDMA device."""
    ib, proto_env = bool(pr.get("ib_devices")), bool(pr.get("mooncake_protocol_env"))
    if s.transfer == "fake":
        return "fake", "asked for"
    if s.transfer == "mooncake" or (pr.get("mooncake") and (ib or proto_env)):
        if not ib and proto_env and not os.environ.get("MOONCAKE_PROTOCOL"):
            s.mooncake_protocol = "tcp"
        why = "asked for" if s.transfer == "mooncake" else "installed"
        return "mooncake", why + (f", MOONCAKE_PROTOCOL={s.mooncake_protocol}" if s.mooncake_protocol else "")
    if not pr.get("mooncake"):
        return "fake", "Mooncake is not installed (pip install mooncake-transfer-engine)"
    return "fake", "Mooncake needs an RDMA device on this release and /sys/class/infiniband has none"


def preflight(pr: dict[str, Any], s: Settings) -> list[str]:
    """What stops the check before anything starts (empty: nothing)."""
    bad = []
    if "probe_error" in pr:
        return [f"{s.python} did not run: {pr['probe_error']}"]
    if "sglang" not in pr:
        bad.append(f"sglang does not import in {s.python}: {pr.get('sglang_error')}")
    if "forensics" not in pr:
        bad.append(f"kv-forensics does not import in {s.python}: {pr.get('forensics_error')} (pip install -e .)")
    if not pr.get("entry_point"):
        bad.append(
            "the entry point sglang.srt.plugins: kv_forensics is not installed: SGLang's load_plugins() "
            "would not load the plugin (pip install -e . in this repository, in this environment)"
        )
    env = pr.get("plugins_env")
    if env and "kv_forensics" not in env.split(","):
        bad.append(f"SGLANG_PLUGINS={env} leaves kv_forensics out")
    if not pr.get("cuda"):
        bad.append(f"no CUDA device visible to torch{': ' + pr['torch_error'] if 'torch_error' in pr else ''}")
    if s.lb == "router" and not pr.get("router"):
        bad.append("--lb router needs sglang_router (pip install sglang-router)")
    return bad


def shown(cmd: list[str], env: dict[str, str] | None = None) -> str:
    pre = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
    return (pre + " " if pre else "") + shlex.join(cmd)


class Servers:
    """The processes this check started, each in its own session (its process group holds the
    scheduler and detokenizer SGLang spawns): stopped by group, SIGTERM then SIGKILL."""

    def __init__(self, s: Settings) -> None:
        self.s = s
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, cmd: list[str], env: dict[str, str]) -> None:
        log = log_path(self.s, name)
        log.parent.mkdir(parents=True, exist_ok=True)
        say(f"starting {name}: log {log}")
        fh = log.open("ab")
        self.procs[name] = subprocess.Popen(
            cmd, stdout=fh, stderr=subprocess.STDOUT, env={**os.environ, **env}, start_new_session=True
        )
        fh.close()

    def tail(self, name: str, n: int = 25) -> str:
        try:
            lines = log_path(self.s, name).read_text(errors="replace").splitlines()[-n:]
        except OSError:
            return "(no log)"
        return "\n".join("    " + x for x in lines)

    def wait_ready(self, name: str, url: str, timeout: float) -> None:
        end = time.time() + timeout
        p = self.procs[name]
        while time.time() < end:
            if p.poll() is not None:
                raise CheckError(
                    f"{name} exited with code {p.returncode} while starting; the last lines of "
                    f"{log_path(self.s, name)}:\n{self.tail(name)}"
                )
            try:
                with urllib.request.urlopen(url + "/health", timeout=5) as r:
                    if r.status == 200:
                        say(f"{name} is ready ({url})")
                        return
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(2)
        raise CheckError(
            f"{name} was not ready after {timeout:.0f} s (--start-timeout); the last lines of "
            f"{log_path(self.s, name)}:\n{self.tail(name)}"
        )

    def check_alive(self) -> None:
        for name, p in self.procs.items():
            if p.poll() is not None:
                raise CheckError(
                    f"{name} exited with code {p.returncode} during the run; the last lines of "
                    f"{log_path(self.s, name)}:\n{self.tail(name)}"
                )

    def stop(self, timeout: float) -> None:
        for name in reversed(list(self.procs)):  # the router first, prefill last
            p = self.procs[name]
            if p.poll() is None:
                say(f"stopping {name}")
                self._signal(p, signal.SIGTERM)
                try:
                    p.wait(timeout)
                except subprocess.TimeoutExpired:
                    say(f"{name} did not stop in {timeout:.0f} s: killing its process group")
                    self._signal(p, signal.SIGKILL)
                    p.wait(30)
            self._signal(p, signal.SIGKILL)  # what the launcher left of its group (SGLang's own children)

    @staticmethod
    def _signal(p: subprocess.Popen[bytes], sig: int) -> None:
        try:
            os.killpg(p.pid, sig)  # the group this check made for it (start_new_session), nothing else
        except (ProcessLookupError, PermissionError):
            pass


def plugin_loaded(s: Settings, node: str) -> bool:
    """The plugin's recorder makes kvf/<node>/pages at its first allocation (the server's warmup)."""
    return (kvf_dir(s, node) / "pages").is_dir()


def analyse(s: Settings, python: str, timeout: float) -> None:
    run = s.run
    bundle, out = run / "bundle", run / "findings"
    done = assemble(run, bundle)
    say(
        f"bundle {bundle}: {done['requests']} gateway records, {', '.join(done['logs'])}, "
        f"{done['page_files']} page files ({done['page_events']} events; {done['peers_named']} transfer rows' "
        f"peer host:port named {DECODE})"
    )
    say("running: " + shown(investigate_cmd(python, bundle, out)))
    text = investigate(python, bundle, out, timeout)
    print("\n".join("  " + x for x in text.strip().splitlines()[-12:]))
    print(figures(run, out))


def dry_run(s: Settings, pr: dict[str, Any], a: argparse.Namespace) -> int:
    backend, why = resolve_transfer(s, pr)
    say(f"dry run: nothing is started. Run folder {s.run}; transfer backend {backend} ({why})")
    for msg in preflight(pr, s):
        say(f"  (a real run would stop here: {msg})")
    say(f"write {s.run / 'model' / 'config.json'} (a 2-layer Llama, weights random: --load-format dummy)")
    for role, node in (("prefill", PREFILL), ("decode", DECODE)):
        say(f"{node}: " + shown(server_cmd(s, role, backend), server_env(s, role, backend)))
        say(f"  > {log_path(s, node)}; ready when GET {s.url(role)}/health answers 200")
    if s.lb == "router":
        say("router: " + shown(router_cmd(s)))
    reqs = plan_requests(s)
    counts = {k: sum(1 for p in reqs if p.kind == k) for k in ("normal", "overlength", "abort_early", "abort_stream")}
    front = s.url("router") if s.lb == "router" else f"{s.url('prefill')} and {s.url('decode')}"
    say(
        f"send {len(reqs)} requests to {front} (POST /generate, {s.concurrency} at a time): {counts}; "
        f"prefill accepts prompts up to {s.max_input} tokens"
    )
    say(
        f"wait {a.settle:.0f} s, stop the servers (SIGTERM to each process group, SIGKILL after {a.stop_timeout:.0f} s)"
    )
    say(f"assemble {s.run / 'bundle'}; then: " + shown(investigate_cmd(s.python, s.run / "bundle", s.run / "findings")))
    return 0


def check_args(s: Settings, backend: str) -> int:
    argvs = [server_cmd(s, r, backend)[3:] for r in ("prefill", "decode")]
    try:
        p = subprocess.run(
            [s.python, "-c", CHECK_ARGS, json.dumps(argvs)], capture_output=True, text=True, timeout=300, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        say(f"error: {s.python} did not parse the arguments: {err}")
        return 1
    out = (p.stdout or p.stderr).strip()
    if p.returncode != 0:
        say(f"error: sglang.srt.server_args does not import in {s.python}:\n" + "\n".join(out.splitlines()[-5:]))
        return 1
    if not out.startswith("ok"):
        say("error: the installed SGLang rejects the servers' arguments:\n" + "\n".join(out.splitlines()[-10:]))
        return 1
    say(
        "the installed SGLang's parser accepts both servers' arguments"
        if out == "ok"
        else "the installed SGLang's source has every flag of both servers' arguments, " + out[3:]
    )
    return 0


def run_check(a: argparse.Namespace, s: Settings) -> int:
    pr = probe(s.python)
    bad = preflight(pr, s)
    if bad:
        for msg in bad:
            say("error: " + msg)
        return 1
    backend, why = resolve_transfer(s, pr)
    say(
        f"sglang {pr['sglang']}, kv-forensics from {pr['forensics']}, GPU {pr['gpus'][0] if pr['gpus'] else '?'}; "
        f"transfer backend {backend} ({why}); guard {s.guard}; page size {s.page_size}"
    )
    if backend == "fake":
        say(
            "note: the fake backend moves no KV: decode runs over pages no transfer wrote, so the guard is "
            "expected to flag every request and investigate to find them all; this checks the plumbing, "
            "not the zero-false-alarm goal (install Mooncake for that)"
        )
    s.run.mkdir(parents=True, exist_ok=True)
    write_model(s)
    reqs = plan_requests(s)
    (s.run / "plan.json").write_text(plan_json(s, backend, reqs))
    servers = Servers(s)
    from traffic import send_all

    try:
        for role, node in (("prefill", PREFILL), ("decode", DECODE)):  # one after the other: each sizes its
            servers.start(node, server_cmd(s, role, backend), server_env(s, role, backend))  # pool on what the
            servers.wait_ready(node, s.url(role), a.start_timeout)  # other left free
            if not plugin_loaded(s, node):
                say(
                    f"warning: {node} started but {kvf_dir(s, node) / 'pages'} does not exist: the plugin may not "
                    f"have loaded (look for 'kv-forensics' in {log_path(s, node)})"
                )
        if s.lb == "router":
            servers.start("router", router_cmd(s), {})
            servers.wait_ready("router", s.url("router"), 120)
        say(f"sending {len(reqs)} requests (seed {s.seed})")
        recs = send_all(s, reqs, backend, a.request_timeout, say)
        (s.run / "client.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
        servers.check_alive()
        say(f"waiting {a.settle:.0f} s for the last transfers and the page files' writer")
        time.sleep(a.settle)
    finally:
        servers.stop(a.stop_timeout)
    analyse(s, s.python, a.investigate_timeout)
    return 0


def main(argv: list[str]) -> int:
    a = parse(argv)
    if a.replay is not None:
        s = settings(a, a.replay)
        try:
            analyse(s, a.python, a.investigate_timeout)
        except CheckError as err:
            say(f"error: {err}")
            return 1
        return 0
    run = a.run or Path(tempfile.gettempdir()) / f"kvf-gpu-check-{time.strftime('%Y%m%d-%H%M%S')}"
    s = settings(a, run.resolve())
    if a.dry_run:
        return dry_run(s, probe(s.python), a)
    if a.check_args:
        return check_args(s, resolve_transfer(s, probe(s.python))[0])
    if a.run is not None and any(run.iterdir() if run.exists() else []):
        say(f"error: {run} is not empty: give a new folder to --run")
        return 1
    ok = False
    try:
        rc = run_check(a, s)
        ok = rc == 0
        return rc
    except CheckError as err:
        say(f"error: {err}")
        return 1
    except KeyboardInterrupt:
        say("interrupted: the servers are stopped")
        return 130
    finally:
        if ok and not a.keep and s.run.exists():
            import shutil

            shutil.rmtree(s.run, ignore_errors=True)
            say(f"removed {s.run} (--keep keeps the logs, page files, bundle and findings)")
        elif s.run.exists():
            say(f"run folder kept: {s.run} (--replay {s.run} analyses it again)")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
