"""The runtime topology designer (what serves a request with a model designer) on an
`openai-chat:` designer over real HTTP: the design request and its usage, transient faults
waited out, and a persistent one answered with the fallback topology and the provider's line."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic_ai import Agent

from core.agents.providers import ProviderPolicy, use_policy
from core.ir.design import TopologyDesign
from core.runtime_design.designer import DesignResult, RuntimeTopologyDesigner
from tests.fixtures.openai_server import Fail, OpenAIServer, ResponsesShape
from tests.providers.hosted import DESIGN, SEED, answer

FAST = ProviderPolicy(timeout_s=1.0, max_wait_s=0.1, backoff_s=0.01, max_backoff_s=0.02)
"""Waits 0.01 + 0.02 x 4 = 0.09 s: 6 attempts before a 6th wait would pass 0.1 s."""


@pytest.fixture
def server(openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIServer]:
    openai_server.script(answer)
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback")
    with use_policy(FAST):
        yield openai_server


def design(goal: str) -> DesignResult:
    designer_agent: Agent[None, TopologyDesign] = Agent(
        "openai-chat:gpt-4o-mini", output_type=TopologyDesign, name="runtime_designer"
    )
    agents: dict[str, Any] = {"small": lambda: None, "large": lambda: None}
    designer = RuntimeTopologyDesigner(designer_agent, {}, agents, fallback_spec=SEED)
    return asyncio.run(designer.design(goal))


def test_a_design_over_http_is_one_request_with_its_usage(server: OpenAIServer) -> None:
    result = design("What is 2 + 4?")
    assert result.source == "designer"
    assert result.spec.model_dump(mode="json", exclude_none=True)["name"] == DESIGN["spec"]["name"]
    assert [(r.model, r.tools) for r in server.log] == [("gpt-4o-mini", ("final_result",))]
    assert [(u.model_name, u.requests, u.input_tokens, u.output_tokens) for u in result.usage] == [
        ("openai:gpt-4o-mini", 1, 900, 80)
    ]


def test_a_transient_fault_is_waited_out(server: OpenAIServer) -> None:
    server.queue(Fail(429, retry_after_ms=10), Fail(500))
    result = design("What is 2 + 4?")
    assert result.source == "designer"
    assert server.statuses() == [429, 500, 200]


def test_a_persistent_fault_falls_back_with_the_providers_line(server: OpenAIServer) -> None:
    server.script(lambda body: Fail(503))
    result = design("What is 2 + 4?")
    assert result.source == "fallback"
    assert len(server.log) == 6
    assert result.error is not None
    assert (
        f"model 'openai:gpt-4o-mini' at {server.base_url}: server error (HTTP 503) after 6 "
        "attempts and 0.1 s of waiting" in result.error
    )


def test_a_reply_in_the_wrong_api_shape_falls_back_naming_the_prefix(
    server: OpenAIServer,
) -> None:
    server.script(lambda body: ResponsesShape())
    result = design("What is 2 + 4?")
    assert (result.source, len(server.log)) == ("fallback", 1)  # not retried
    assert result.error == (
        "the designer agent raised ProviderError: model 'openai:gpt-4o-mini' at "
        f"{server.base_url}: the reply to /chat/completions is not a chat completion (the "
        "openai-chat: prefix needs one): check that OPENAI_BASE_URL is the server's "
        "OpenAI-compatible /v1, or, for a server with only the Responses API, use "
        "openai:gpt-4o-mini"
    )
