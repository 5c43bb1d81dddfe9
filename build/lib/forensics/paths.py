"""Where the project's SQL and templates live, and the one helper that quotes paths for SQL."""

from pathlib import Path

# inside the package, so that an installed wheel carries them (pyproject.toml: package-data)
PACKAGE = Path(__file__).resolve().parent
QUERIES = PACKAGE / "queries"
TEMPLATES = PACKAGE / "templates"


def sql_literal(value: str | Path) -> str:
    """Quote a string (a file path) as a SQL literal; for places DuckDB does not take parameters."""
    return "'" + str(value).replace("'", "''") + "'"


def load_query(stage: str, name: str) -> str:
    return (QUERIES / stage / f"{name}.sql").read_text(encoding="utf-8")
