"""Where each stage keeps its SQL (`forensics/<stage>/queries/`) and the report its templates."""

from pathlib import Path

# inside the package, so that an installed wheel carries them (pyproject.toml: package-data)
PACKAGE = Path(__file__).resolve().parent
STAGES_WITH_SQL = ("audit", "ingest", "cohorts", "ownership", "findings", "report", "catalog")
TEMPLATES = PACKAGE / "report" / "templates"


def query_dir(stage: str) -> Path:
    return PACKAGE / stage / "queries"


def query_files() -> list[Path]:
    """Every query file of every stage, in a fixed order."""
    return sorted(p for stage in STAGES_WITH_SQL for p in query_dir(stage).rglob("*.sql"))


def step_files(stage: str, name: str) -> list[Path]:
    """The files of one step: <name>.sql, or the files of the folder <name>/ in name order (a step
    of several statements: one statement per file, each named after the table it makes)."""
    folder = query_dir(stage) / name
    return sorted(folder.glob("*.sql")) if folder.is_dir() else [query_dir(stage) / f"{name}.sql"]


def load_query(stage: str, name: str) -> str:
    return (query_dir(stage) / f"{name}.sql").read_text(encoding="utf-8")
