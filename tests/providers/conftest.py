"""The loopback OpenAI-compatible server (`tests/fixtures/openai_server.py`) for every test here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fixtures.openai_server import OpenAIServer, serve


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    """A started server on 127.0.0.1 (a free port), stopped after the test."""
    yield from serve()
