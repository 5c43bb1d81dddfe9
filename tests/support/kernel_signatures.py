"""Every numba kernel's compiled signatures after the suite's representative investigations, read in a
fresh process so that no other test's direct calls of a kernel count:
`python -m tests.support.kernel_signatures WORK` writes them to WORK/signatures.json ({kernel: [signature,
...]}).

The runs: the bundled sample; a small simulated incident with a decode node without page telemetry
(the allocator model's kernels); and a copy of it whose page events lost a block (seq_gap) and whose
JSON-lines page file came out of order (reordered): the kinds a user's first run may meet. Numba
compiles a kernel once per type of its arguments (20 to 25 s of CPU for the larger walks), so a
second signature is a second compile on a clean clone and on a user's first run of that kind."""

from __future__ import annotations

import importlib
import json
import pkgutil
import random
import shutil
import sys
from pathlib import Path

import forensics
from forensics.ownership.execution.nodes import Execution
from forensics.pipeline import investigate
from forensics.simulate import build_config, simulate
from tests.support import SAMPLE, damage, numba_once

AS_OF = "2026-09-10T12:00:00Z"
BESIDE = ("forensics.sglang", "forensics.simulate")  # no kernels (and a __main__ module runs its command)


def kernels() -> dict[str, object]:
    """Every numba dispatcher the package defines, by its qualified name."""
    from numba.core.registry import CPUDispatcher

    found: dict[str, object] = {}
    for info in pkgutil.walk_packages(forensics.__path__, "forensics."):
        if info.name.startswith(BESIDE) or info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, CPUDispatcher) and value.__module__ == info.name:
                found[f"{info.name}.{name}"] = value
    return found


def _pages_reordered(bundle: Path) -> None:
    """damage.reordered with the first seed whose target is a page file."""
    for seed in range(100):
        path, source = damage._text_target(bundle, random.Random(f"reordered:{seed}"))
        if source == "pages":
            damage.apply("reordered", bundle, seed)
            return
    raise AssertionError("no seed reorders a page file")


def bundles(work: Path) -> list[Path]:
    simulate(work / "sim", build_config("default", seed=11, requests=300, no_telemetry="decode-1"))
    damaged = work / "damaged"
    shutil.copytree(work / "sim" / "bundle", damaged)
    damage.apply("seq_gap", damaged, 3)
    _pages_reordered(damaged)
    return [SAMPLE, work / "sim" / "bundle", damaged]


def main(work: Path) -> None:
    numba_once.serialize(numba_once.lock_path(Path(forensics.__file__).parent))  # as the test workers compile
    for i, bundle in enumerate(bundles(work)):
        investigate(bundle, work / f"out{i}", as_of=AS_OF, execution=Execution(workers=1))
    sigs = {name: [str(s) for s in k.signatures] for name, k in kernels().items()}  # type: ignore[attr-defined]
    (work / "signatures.json").write_text(json.dumps(sigs, indent=1, sort_keys=True))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
