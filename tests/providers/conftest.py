"""The loopback OpenAI-compatible server (`tests/fixtures/openai_server.py`) for every test here.

Other test modules switch pydantic-ai's real model requests off for the whole process
(`pydantic_ai.models.ALLOW_MODEL_REQUESTS = False` at import). These tests make real requests,
to this server on 127.0.0.1 only (each test points `OPENAI_BASE_URL` at it): the switch is on
while the server runs.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic_ai import models

from tests.fixtures.openai_server import OpenAIServer, serve


@pytest.fixture
def openai_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIServer]:
    """A started server on 127.0.0.1 (a free port), stopped after the test; real model requests
    allowed while it runs."""
    monkeypatch.setattr(models, "ALLOW_MODEL_REQUESTS", True)
    yield from serve()
