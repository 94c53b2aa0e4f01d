"""`solve GOAL --planner openai-chat:...` over real HTTP, against the loopback server.

The planner and the specialists it spawns are OpenAI chat models reached through
`OPENAI_BASE_URL`. The happy path is checked request by request and priced by genai-prices; each
fault is checked for its attempts, its bounded wait and its message. A solve has no resume (a
solve is one short run; `--db` keeps its roster): a persistent fault ends it with exit 130 and
the provider's message, never a subtask marked failed for it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from genai_prices import Usage, calc_price

from core.agents.providers import ProviderPolicy, use_policy
from studio.cli import main
from tests.fixtures.openai_server import (
    CutOff,
    Fail,
    Malformed,
    OpenAIServer,
    Reply,
    ResponsesShape,
    Slow,
)
from tests.providers.hosted import solve_answer

GOAL = "write a haiku and count its words"
SOLVE = ["solve", GOAL, "--planner", "openai-chat:gpt-4o-mini", "--no-memory"]
FAST = ProviderPolicy(timeout_s=0.2, max_wait_s=0.5, backoff_s=0.01, max_backoff_s=0.05)
"""Waits 0.01, 0.02, 0.04, then 0.05: 12 attempts before a 12th wait would pass 0.5 s."""


@pytest.fixture
def server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, openai_server: OpenAIServer
) -> Iterator[OpenAIServer]:
    openai_server.script(solve_answer)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback")
    with use_policy(FAST):
        yield openai_server


def usd(input_tokens: int, output_tokens: int) -> Decimal:
    tokens = Usage(input_tokens=input_tokens, output_tokens=output_tokens)
    return calc_price(tokens, "gpt-4o-mini", provider_id="openai").total_price


def test_a_solve_over_http_sends_the_expected_requests_and_prices_them(
    server: OpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(SOLVE)
    cap = capsys.readouterr()
    assert code == 0, cap.err
    assert [(r.model, r.tools, r.user.split("\n")[0]) for r in server.log] == [
        ("gpt-4o-mini", ("final_result",), "Decompose this goal into subtasks (at most 10)."),
        ("gpt-4o-mini", ("final_result",), "Design one specialist agent (an AgentSpec) for "
         "this subtask of the goal."),
        ("gpt-4o-mini", (), f"Goal: {GOAL}"),
        ("gpt-4o-mini", ("final_result",), "Design one specialist agent (an AgentSpec) for "
         "this subtask of the goal."),
        ("gpt-4o-mini", (), f"Goal: {GOAL}"),
    ]  # fmt: skip
    # the plan (300 in, 60 out), two specs (400, 40) and two specialists' answers (50, 10)
    total = usd(300, 60) + 2 * usd(400, 40) + 2 * usd(50, 10)
    assert total == Decimal("0.000276")
    assert cap.out.splitlines()[-1].startswith(
        f"cost: ${total:.6f} over 5 model requests (1200 input, 160 output tokens), "
    )


FAULTS = {
    "500": (Fail(500), 12, "server error (HTTP 500) after 12 attempts and 0.5 s of waiting"),
    "429": (
        Fail(429, retry_after_ms=125),
        5,
        "rate limited (HTTP 429) after 5 attempts and 0.5 s of waiting",
    ),
    "slow": (Slow(1.0), 12, "no reply within the 0.2 s timeout after 12 attempts"),
    "cut": (CutOff(), 12, "connection failed (peer closed connection without sending complete"),
    "malformed": (Malformed(), 12, "an unreadable reply (Failed to decode response as JSON"),
}


WAITED = {
    "500": 0.47,  # 0.01 + 0.02 + 0.04 + 0.05 x 8, s
    "429": 0.5,  # retry-after-ms 125 x 4
    "slow": 0.47 + 12 * 0.2,  # the waits and each attempt's 0.2 s timeout
    "cut": 0.47,
    "malformed": 0.47,
}
"""The least time a persistent fault takes to end the solve, s."""


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_planner_fault_that_persists_ends_the_solve_with_the_providers_message(
    server: OpenAIServer, capsys: pytest.CaptureFixture[str], fault: str
) -> None:
    answer, attempts, middle = FAULTS[fault]
    server.script(lambda body: answer)
    started = time.monotonic()
    code = main(SOLVE)
    elapsed = time.monotonic() - started
    cap = capsys.readouterr()
    assert code == 130
    # the waits were made, and no more: at least their sum (plus each slow attempt's timeout),
    # and within a bound (the test's slack for a loaded machine)
    assert WAITED[fault] <= elapsed < WAITED[fault] + 10.0
    first = cap.err.splitlines()[-1]
    assert first.startswith(
        f"topology-studio: error: solve: model 'openai-chat:gpt-4o-mini' at {server.base_url}: "
    )
    assert middle in first
    assert len(server.log) == attempts
    assert {r.user.split("\n")[0] for r in server.log} == {
        "Decompose this goal into subtasks (at most 10)."
    }  # the same call each time


def test_a_transient_fault_is_waited_out_and_the_solve_goes_on(
    server: OpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    server.queue(Fail(503), Fail(429, retry_after_ms=20), CutOff())
    code = main(SOLVE)
    cap = capsys.readouterr()
    assert code == 0, cap.err
    assert [r.status for r in server.log] == [503, 429, 200, 200, 200, 200, 200, 200]
    assert [r.fault for r in server.log][:3] == ["fail", "fail", "cut"]
    assert "summary: 2/2 subtasks succeeded" in cap.out


def test_a_refused_connection_ends_the_solve_naming_the_base_url(
    server: OpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    server.stop()
    code = main(SOLVE)
    cap = capsys.readouterr()
    assert code == 130
    assert cap.err.splitlines()[-1] == (
        f"topology-studio: error: solve: model 'openai-chat:gpt-4o-mini' at {server.base_url}: "
        "connection failed (All connection attempts failed) after 12 attempts and 0.5 s of "
        "waiting: start the server, or fix OPENAI_BASE_URL, then resume"
    )


def test_a_schema_failing_plan_is_retried_by_pydantic_ai_then_reported(
    server: OpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    server.script(lambda body: Reply(tool_args={"steps": []}))
    code = main(SOLVE)
    cap = capsys.readouterr()
    assert code == 1
    assert len(server.log) == 2  # the plan and pydantic-ai's one output retry
    assert cap.err.splitlines()[-1] == (
        "topology-studio: error: solve: the planner 'openai-chat:gpt-4o-mini' answered in a "
        "shape that fails its output schema, also after pydantic-ai's output retry "
        "(Exceeded maximum output retries (1))"
    )


WRONG_API = {
    "responses-404": (
        "openai:gpt-4o-mini",
        False,
        "the server has no OpenAI Responses API (/responses answered HTTP 404); the openai: "
        "prefix needs it: use openai-chat:gpt-4o-mini (chat completions, what Ollama, vLLM and "
        "llama.cpp speak)",
    ),
    "responses-in-chat-shape": (
        "openai:gpt-4o-mini",
        True,
        "the server has no OpenAI Responses API (/responses answered in another API's shape); "
        "the openai: prefix needs it: use openai-chat:gpt-4o-mini (chat completions, what "
        "Ollama, vLLM and llama.cpp speak)",
    ),
    "chat-in-responses-shape": (
        "openai-chat:gpt-4o-mini",
        False,
        "the reply to /chat/completions is not a chat completion (the openai-chat: prefix "
        "needs one): check that OPENAI_BASE_URL is the server's OpenAI-compatible /v1, or, for "
        "a server with only the Responses API, use openai:gpt-4o-mini",
    ),
}


@pytest.mark.parametrize("case", sorted(WRONG_API))
def test_a_reply_in_the_wrong_api_shape_ends_the_solve_naming_the_prefix(
    server: OpenAIServer, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    planner, chat_shape, why = WRONG_API[case]
    server.responses_in_chat_shape = chat_shape
    server.script(lambda body: ResponsesShape())
    code = main(["solve", GOAL, "--planner", planner, "--no-memory"])
    cap = capsys.readouterr()
    assert code == 130
    assert cap.err.splitlines()[-1] == (
        f"topology-studio: error: solve: model {planner!r} at {server.base_url}: {why}"
    )
    assert "TypeError" not in cap.err and "Traceback" not in cap.err
    assert len(server.log) == 1  # the planner's one request: not retried


def test_a_retry_after_in_seconds_is_waited_within_the_bound_and_past_it_ends_at_once(
    server: OpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    server.queue(Fail(429, retry_after="1"))
    with use_policy(FAST.model_copy(update={"max_wait_s": 1.5})):
        started = time.monotonic()
        code = main(SOLVE)
        elapsed = time.monotonic() - started
    assert code == 0, capsys.readouterr().err
    assert [r.status for r in server.log][:2] == [429, 200]  # the same plan, asked again
    assert server.log[0].body == server.log[1].body
    assert 1.0 <= elapsed < 11.0  # the provider's 1 s, not the 0.01 s backoff
    server.reset()
    server.queue(Fail(429, retry_after="1"))  # 1 s would pass FAST's 0.5 s: not started
    started = time.monotonic()
    code = main(SOLVE)
    elapsed = time.monotonic() - started
    cap = capsys.readouterr()
    assert code == 130 and elapsed < 1.0
    assert server.statuses() == [429]
    assert cap.err.splitlines()[-1] == (
        f"topology-studio: error: solve: model 'openai-chat:gpt-4o-mini' at {server.base_url}: "
        "rate limited (HTTP 429): wait, or lower [rate_limits.openai-chat] or raise [models] "
        "max_wait_s, then resume"
    )
