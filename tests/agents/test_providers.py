"""`core.agents.providers`: the one fault rule, on a virtual clock, against the loopback server.

Each test runs a real pydantic-ai `openai-chat:` agent over HTTP (the SDK's own retries off, as
the rule sets them) and `call_with_retries` with a fake `sleep` that records the waits, so the
waits asked for are exact and no test sleeps for them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic_ai import Agent, models

from core.agents.providers import ProviderPolicy, apply_base_url, call_with_retries
from core.errors import ProviderError
from tests.fixtures.openai_server import Fail, OpenAIServer, Reply, serve

POLICY = ProviderPolicy(timeout_s=1.0, max_wait_s=10.0, backoff_s=1.0, max_backoff_s=4.0)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIServer]:
    monkeypatch.setattr(models, "ALLOW_MODEL_REQUESTS", True)
    for started in serve():
        monkeypatch.setenv("OPENAI_BASE_URL", started.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback")
        yield started


def run(
    server: OpenAIServer, *answers: Any, policy: ProviderPolicy = POLICY
) -> tuple[Any, list[float]]:
    """Queue `answers`, make one call through the rule; (its output or error, the waits)."""
    server.queue(*answers)
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async def go() -> Any:
        agent = Agent("openai-chat:gpt-4o-mini", model_settings=policy.model_settings())
        result = await call_with_retries(
            lambda: agent.run("hi"), model="openai-chat:gpt-4o-mini", policy=policy, sleep=sleep
        )
        return result.output

    try:
        return asyncio.run(go()), waits
    except ProviderError as exc:
        return exc, waits


def test_retry_after_is_honoured(server: OpenAIServer) -> None:
    out, waits = run(server, Fail(429, retry_after="1"), Fail(503, retry_after="3"))
    assert (out, waits) == ("ok", [1.0, 3.0])
    assert server.statuses() == [429, 503, 200]


def test_without_retry_after_the_wait_doubles_up_to_its_cap(server: OpenAIServer) -> None:
    longer = POLICY.model_copy(update={"max_wait_s": 20.0})
    out, waits = run(server, *[Fail(500)] * 5, policy=longer)
    assert (out, waits) == ("ok", [1.0, 2.0, 4.0, 4.0, 4.0])
    assert server.statuses() == [500] * 5 + [200]


def test_the_total_wait_is_bounded_and_the_error_says_what_to_do(server: OpenAIServer) -> None:
    out, waits = run(server, *[Fail(500)] * 10)
    assert waits == [1.0, 2.0, 4.0]  # a 4th wait (4 s) would pass max_wait_s = 10 s
    assert isinstance(out, ProviderError)
    assert (out.status, out.transient, out.model) == (500, True, "openai-chat:gpt-4o-mini")
    assert str(out) == (
        f"model 'openai-chat:gpt-4o-mini' at {server.base_url}: server error (HTTP 500) after "
        "4 attempts and 7.0 s of waiting: check the server (or the provider's status page), "
        "then resume"
    )


def test_a_retry_after_past_the_bound_is_not_waited_for(server: OpenAIServer) -> None:
    out, waits = run(server, Fail(429, retry_after="60"))
    assert waits == []
    assert isinstance(out, ProviderError) and out.status == 429
    assert "rate limited (HTTP 429): wait, or lower [rate_limits.openai-chat]" in str(out)


@pytest.mark.parametrize(
    ("status", "what"),
    [
        (400, "request refused (HTTP 400)"),
        (401, "the key was refused (HTTP 401): check the provider's API key"),
        (404, "not found (HTTP 404): check the model id and OPENAI_BASE_URL"),
    ],
)
def test_another_4xx_is_not_retried(server: OpenAIServer, status: int, what: str) -> None:
    out, waits = run(server, Fail(status))
    assert waits == []
    assert isinstance(out, ProviderError) and not out.transient
    assert what in str(out)
    assert server.statuses() == [status]


def test_a_reply_is_not_retried(server: OpenAIServer) -> None:
    out, waits = run(server, Reply(content="fine"))
    assert (out, waits, server.statuses()) == ("fine", [], [200])


def test_a_problems_base_url_is_used_unless_the_environment_has_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "")  # recorded, so the test's change is undone
    monkeypatch.delenv("OPENAI_BASE_URL")
    apply_base_url("http://127.0.0.1:11434/v1")
    import os

    assert os.environ["OPENAI_BASE_URL"] == "http://127.0.0.1:11434/v1"
    apply_base_url("http://elsewhere/v1")  # the environment wins
    assert os.environ["OPENAI_BASE_URL"] == "http://127.0.0.1:11434/v1"
