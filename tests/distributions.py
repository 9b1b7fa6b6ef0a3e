"""An installed distribution on the import path, as pip leaves it (for entry point tests)."""

from __future__ import annotations

from pathlib import Path


def install(site: Path, name: str, source: str, entry_points: str) -> Path:
    """Package ``name`` (its ``__init__`` is ``source``) with ``entry_points.txt`` under
    ``site``; put ``site`` on the import path to install it. Returns ``site``."""
    (site / name).mkdir(parents=True)
    (site / name / "__init__.py").write_text(source)
    info = site / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)
    return site
