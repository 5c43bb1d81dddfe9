"""Count the query-sized SQL strings left in Python under forensics/ (issue #49, "Query-sized SQL leaves
Python"): a string literal or f-string, not a docstring, of more than 3 lines that holds SELECT, INSERT,
CREATE or WITH as an upper-case word. Prints each one (module:line, its lines) and the totals.

Usage: python scripts/sql_in_python.py [--quiet] [ROOT]   (ROOT defaults to forensics/ beside this script)
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

KEYWORD = re.compile(r"\b(SELECT|INSERT|CREATE|WITH)\b")
MIN_LINES = 4  # "over ~3 lines": a one-line probe or a short DDL stays


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string nodes that are docstrings (a module's, a class's, a function's)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def query_strings(path: Path) -> list[tuple[int, int]]:
    """(line, line count) of each query-sized SQL string of one module."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    skip = _docstrings(tree)
    inner = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    found = []
    for node in ast.walk(tree):
        if id(node) in skip or id(node) in inner:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str) or isinstance(node, ast.JoinedStr):
            # its lines from its positions: the segment, which splits the whole source on every call, is
            # read only for the few strings long enough to count (the whole package took 12 s of CPU)
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines >= MIN_LINES and KEYWORD.search(ast.get_source_segment(source, node) or ""):
                found.append((node.lineno, lines))
    return sorted(found)


def main(argv: list[str]) -> int:
    quiet = "--quiet" in argv
    args = [a for a in argv if a != "--quiet"]
    root = Path(args[0]) if args else Path(__file__).resolve().parent.parent / "forensics"
    total = lines = 0
    for path in sorted(root.rglob("*.py")):
        for line, n in query_strings(path):
            total += 1
            lines += n
            if not quiet:
                print(f"{path.relative_to(root.parent).as_posix()}:{line}  {n} lines")
    print(f"{total} query-sized SQL strings, {lines} lines, in {root.name}/")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
