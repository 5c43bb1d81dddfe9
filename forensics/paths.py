"""Where each stage keeps its SQL (`forensics/<stage>/queries/`) and the report its templates."""

from pathlib import Path

# inside the package, so that an installed wheel carries them (pyproject.toml: package-data)
PACKAGE = Path(__file__).resolve().parent
STAGES_WITH_SQL = ("ingest", "ownership", "findings", "report")
TEMPLATES = PACKAGE / "report" / "templates"


def query_dir(stage: str) -> Path:
    return PACKAGE / stage / "queries"


def query_files() -> list[Path]:
    """Every query file of every stage, in a fixed order."""
    return sorted(p for stage in STAGES_WITH_SQL for p in query_dir(stage).glob("*.sql"))


def load_query(stage: str, name: str) -> str:
    return (query_dir(stage) / f"{name}.sql").read_text(encoding="utf-8")
