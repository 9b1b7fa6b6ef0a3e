"""The documentation site builds with warnings as errors (broken links, bad API references)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def test_the_docs_site_builds_strict(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q",
                           "-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path / "site")],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    assert "run_sync" in api and "RunResult" in api  # mkdocstrings rendered the API
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert (tmp_path / "site" / (page.stem if page.stem != "index" else "")).exists(), page


def test_every_docs_page_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    missing = [p.name for p in (ROOT / "docs").glob("*.md") if f" {p.name}" not in nav]
    assert not missing, f"mkdocs.yml's nav lacks {missing}"
