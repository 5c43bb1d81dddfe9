"""Where the project's SQL and templates live, and the one helper that quotes paths for SQL."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUERIES = ROOT / "queries"
TEMPLATES = ROOT / "reports" / "templates"


def sql_literal(value: str | Path) -> str:
    """Quote a string (a file path) as a SQL literal; for places DuckDB does not take parameters."""
    return "'" + str(value).replace("'", "''") + "'"


def load_query(stage: str, name: str) -> str:
    return (QUERIES / stage / f"{name}.sql").read_text(encoding="utf-8")
