from __future__ import annotations

from collections.abc import Iterator

import pytest

from thinkloop.testing.openai_server import OpenAIServer


@pytest.fixture(scope="package")
def server() -> Iterator[OpenAIServer]:
    """One loopback server for the package (stopping one per test races its connections)."""
    with OpenAIServer() as srv:
        yield srv

