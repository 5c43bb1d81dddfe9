"""Import contracts of the package, read from the source (every import, at module level or inside a
function, counts: a lazy import only hides a cycle from the interpreter, not from a reader):
- no cycle among the package's modules;
- the compiled kernels (pure numpy/numba walks) import neither DuckDB nor the stages that drive them
  (of the package: errors, and keys for the op codes they walk);
- the simulator, the audit and the CLI sit beside the pipeline: no analysis module imports them;
- the watcher reads engine lines through the engines, not through ingest."""

from __future__ import annotations

import ast
from pathlib import Path

from forensics.paths import PACKAGE

# the layers, lowest first: a module may import its own layer and those below it, never one above
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "forensics.errors",
        "forensics.paths",
        "forensics.keys",
        "forensics.contract",
        "forensics.engines",
        # what each gateway's log looks like, as engines is for the engines: read by intake and ingest,
        # written by the simulator's writers beside the readers, so it imports none of them
        "forensics.gateway_formats",
        "forensics.progress",
    ),
    ("forensics.db", "forensics.outputs"),
    ("forensics.intake",),
    # the manifest's chain and signature (the pipeline and the notices rewrite it); the walk from a
    # notice's citations to the evidence lines, which verify runs
    ("forensics.custody", "forensics.citations"),
    ("forensics.audit",),  # the config audit: the report names its verdict
    ("forensics.ingest",),
    ("forensics.cohorts",),
    ("forensics.ownership",),
    ("forensics.findings",),
    ("forensics.report",),
    ("forensics.catalog",),  # the database's public views and comments, made at the end of a run
    ("forensics.watch",),  # the live detector: the engines' line readers, fed as files grow
    ("forensics.run",),  # one run's settings, read once: what the pipeline hands the stages
    ("forensics.pipeline",),
    ("forensics.pack",),  # the compliance pack of a finished run: the report's notices, the SIEM export, custody
    ("forensics.cli", "forensics.__main__"),
)
# the simulator and the SIEM export: they import the bottom layers only, and only the CLI imports them
# forensics.sglang, the SGLang plugin: it runs inside SGLang's processes and imports none of the rest
BESIDE = ("forensics.simulate", "forensics.siem", "forensics.sglang")
KERNELS = "forensics.ownership.kernels"
EXECUTION = "forensics.ownership.execution"
STEPS = "forensics.ownership.steps"


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    modules = {_module(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + [base]).strip(".")
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            for name in names:
                while name and name not in modules:  # a name inside a module: the module
                    name = name.rpartition(".")[0]
                if name and name != mod and name != "forensics":  # the package root holds only __version__
                    graph[mod].add(name)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str]:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return stack[stack.index(n) :] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return []

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return []


def test_the_package_has_no_import_cycle() -> None:
    assert _cycle(_graph()) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def _layer(mod: str) -> int:
    if mod.startswith(BESIDE):
        return 1  # beside the pipeline: may use the bottom layers (errors, db, outputs) only
    for i, prefixes in enumerate(LAYERS):
        if any(mod == p or mod.startswith(p + ".") for p in prefixes):
            return i
    raise AssertionError(f"{mod}: in no layer (add it to LAYERS)")


def test_no_layer_imports_one_above_it() -> None:
    for mod, deps in _graph().items():
        upward = sorted(d for d in deps if _layer(d) > _layer(mod))
        assert not upward, f"{mod} imports {upward}, a layer above it"


def test_watch_reads_lines_through_the_engines_not_ingest() -> None:
    """The watcher's readers are derived from the engines' line shapes, as ingest's are: it imports the
    engines, never ingest (whose private helpers it once borrowed)."""
    graph = _graph()
    watch = [m for m in graph if m.startswith("forensics.watch")]
    assert "forensics.watch.chunks" in watch
    for mod in watch:
        assert not [d for d in graph[mod] if d.startswith("forensics.ingest")], mod


def test_only_the_cli_imports_the_simulator() -> None:
    """Nor the SIEM export: only the CLI imports what sits beside the pipeline, and the compliance pack,
    which writes the SIEM export beside the notices."""
    for mod, deps in _graph().items():
        if not mod.startswith(("forensics.cli", "forensics.pack", *BESIDE)):
            assert not [d for d in deps if d.startswith(BESIDE)], mod


def test_kernels_import_neither_duckdb_nor_the_rest_of_ownership() -> None:
    for path in sorted((PACKAGE / "ownership" / "kernels").glob("*.py")):
        tree = ast.parse(path.read_text())
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert "duckdb" not in names, path.name
        ours = {n for n in names if n.startswith("forensics")}
        assert ours <= {"forensics.errors", "forensics.keys"} | {n for n in ours if n.startswith(KERNELS)}, (
            path.name,
            ours,
        )


def test_execution_does_not_import_the_steps_it_runs() -> None:
    for mod, deps in _graph().items():
        if mod.startswith(EXECUTION):
            assert not [d for d in deps if d.startswith(STEPS)], mod


def test_the_layer_check_finds_an_upward_import() -> None:
    assert _layer("forensics.ingest.engine") < _layer("forensics.ownership.steps.screen")
    assert _layer("forensics.db") < _layer("forensics.intake")
