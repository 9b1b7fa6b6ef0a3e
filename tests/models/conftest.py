"""Loopback servers shared by the model tests (one per session, reset per test)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from thinkloop.testing.openai_server import OpenAIServer

from .anthropic_server import AnthropicServer


@pytest.fixture(scope="session")
def _openai_server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


@pytest.fixture
def openai_server(_openai_server: OpenAIServer) -> Iterator[OpenAIServer]:
    _openai_server.clear()
    yield _openai_server
    _openai_server.clear()


@pytest.fixture(scope="session")
def _anthropic_server() -> Iterator[AnthropicServer]:
    srv = AnthropicServer()
    with srv:
        yield srv


@pytest.fixture
def anthropic_server(_anthropic_server: AnthropicServer) -> Iterator[AnthropicServer]:
    _anthropic_server.clear()
    yield _anthropic_server
    _anthropic_server.clear()
