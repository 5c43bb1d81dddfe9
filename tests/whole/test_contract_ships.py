"""Issue #37: the contract ships with the project. The README points at docs/evidence-bundle.md, which
exists in the repository, and at no file outside it (a clone has no ../shared)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parent.parent.parent


def test_readme_links_only_files_the_project_ships() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "../shared" not in readme
    assert "(docs/evidence-bundle.md)" in readme and (ROOT / "docs" / "evidence-bundle.md").is_file()
    for target in re.findall(r"\]\(([^)#\s]+)\)", readme):
        if "://" in target:
            continue
        assert not target.startswith(".."), target
        assert (ROOT / target).exists(), f"README links {target}, which the project does not ship"
