"""`search --strategy meta-agent` over real HTTP, against the loopback OpenAI-compatible server.

The problem (`hosted.py`) has two hosted agents (`openai-chat:gpt-4o-mini`, `openai-chat:gpt-4o`)
and the designer is `openai-chat:gpt-4o-mini`; the base URL and key are set as a user sets them
(`OPENAI_BASE_URL`, `OPENAI_API_KEY`). Each test asserts the exact requests the server saw, the
costs priced by genai-prices for the models named, and, for each fault, the message, the
attempts and that a resume afterwards repeats no answered call.
"""

from __future__ import annotations

import json
import os
import re
from decimal import Decimal
from pathlib import Path

import pytest
from genai_prices import Usage, calc_price

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
from tests.providers.hosted import DESIGN, answer, kv, use_hosted

SEARCH = ["search", "hosted", "--strategy", "meta-agent", "--no-test"]
CHAT = "/v1/chat/completions"
QUESTIONS = ["What is 2 + 4?", "What is 3 + 6?", "What is 4 + 8?", "What is 5 + 10?"]
"""The 4 validation examples, in the order the seed (concurrency 1) asks them."""


@pytest.fixture
def hosted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, openai_server: OpenAIServer
) -> OpenAIServer:
    """The problem in tmp_path, the server answering it, its URL and a key in the environment."""
    use_hosted(tmp_path, monkeypatch, openai_server)
    return openai_server


def usd(model: str, input_tokens: int, output_tokens: int, times: int = 1) -> Decimal:
    """genai-prices' price of `times` calls to OpenAI's `model`."""
    tokens = Usage(input_tokens=input_tokens, output_tokens=output_tokens)
    price = calc_price(tokens, model, provider_id="openai")
    return price.total_price * times


def answered(server: OpenAIServer) -> list[tuple[str, tuple[str, ...], str]]:
    """(model, tools, the messages as JSON) of every request answered in full."""
    return [
        (r.model, r.tools, json.dumps(r.body["messages"])) for r in server.requests() if r.answered
    ]


def resume_id(err: str) -> str:
    found = re.search(r"--resume (\S+)", err)
    assert found is not None, err
    return found.group(1)


def designer_calls() -> list[tuple[str, tuple[str, ...]]]:
    return [("gpt-4o-mini", ("final_result",))] * 3  # the design and 2 reflexion passes


def test_a_meta_agent_search_over_http_sends_the_expected_requests_and_prices_them(
    hosted: OpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(SEARCH)
    cap = capsys.readouterr()
    assert code == 0, cap.err
    # the seed (small) on the 4 examples, 3 designer calls, the design (large) on the 4
    assert [(r.model, r.tools) for r in hosted.log] == [
        *[("gpt-4o-mini", ())] * 4,
        *designer_calls(),
        *[("gpt-4o", ())] * 4,
    ]
    assert [r.user for r in hosted.log if not r.tools] == QUESTIONS * 2
    assert hosted.requests("/v1/responses") == []
    design = usd("gpt-4o-mini", 900, 80, 3)
    candidates = usd("gpt-4o-mini", 100, 20, 4) + usd("gpt-4o", 120, 30, 4)
    assert kv(cap.out, "designer_usd") == (
        f"{design:.6f} (the designer's own model calls; the candidates' evaluations: "
        f"{candidates:.6f})"
    )
    assert kv(cap.out, "cost_usd_total").split()[0] == f"{design + candidates:.6f}"
    assert (design, candidates) == (Decimal("0.000549"), Decimal("0.002508"))
    assert kv(cap.out, "designer_calls") == (
        "3 requests, 2700 input + 240 output tokens "
        "(the designer's own, not in the candidates' figures)"
    )  # each designer reply reports 900 input and 80 output tokens


def test_the_designers_tokens_are_stored_and_shown_apart_by_show_and_runs(
    hosted: OpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """The store keeps each proposal's designer tokens; `show` and `runs` print them beside
    the designer's cost, apart from the candidates' (whose 8 answers are 880 + 200 tokens)."""
    from core.storage import DuckDBRunStore

    assert main(SEARCH) == 0
    run_id = kv(capsys.readouterr().out, "run")
    with DuckDBRunStore(Path("runs.duckdb"), read_only=True) as store:
        row = store.list_runs().iloc[0]
        figures = [
            row[c] for c in ("design_requests", "design_input_tokens", "design_output_tokens")
        ]
        assert (row["run_id"], figures) == (run_id, [3, 2700, 240])
        assert row["design_cost_usd"] == pytest.approx(0.000549, abs=1e-12)
        answers = [store.candidate_examples(run_id, idx) for idx in (0, 1)]
        assert sum(int(a["input_tokens"].sum()) for a in answers) == 880
        assert sum(int(a["output_tokens"].sum()) for a in answers) == 200
    assert main(["show", run_id]) == 0
    out = capsys.readouterr().out
    assert kv(out, "designer_usd") == (
        "0.000549 (the designer's own model calls; the candidates' evaluations: 0.002508)"
    )
    assert kv(out, "designer_calls") == (
        "3 requests, 2700 input + 240 output tokens "
        "(the designer's own, not in the candidates' figures)"
    )
    assert main(["runs"]) == 0
    header, line = capsys.readouterr().out.splitlines()[:2]
    assert header.split() == [
        "run", "problem", "strategy", "status", "started", "candidates", "example_runs",
        "cost_usd", "design_usd", "design_tokens", "best", "best_score",
    ]  # fmt: skip
    cells = line.split()
    assert (cells[0], cells[7:10]) == (run_id, ["0.003057", "0.000549", "2700+240"])


def test_the_openai_prefix_against_a_server_without_the_responses_api_says_to_use_openai_chat(
    hosted: OpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main([*SEARCH, "--meta-model", "openai:gpt-4o-mini"])
    cap = capsys.readouterr()
    assert code == 130
    assert cap.err.splitlines()[0] == (
        f"topology-studio: error: model 'openai:gpt-4o-mini' at {hosted.base_url}: the server "
        "has no OpenAI Responses API (/responses answered HTTP 404); the openai: prefix needs "
        "it: use openai-chat:gpt-4o-mini (chat completions, what Ollama, vLLM and llama.cpp "
        "speak)"
    )
    assert "TypeError" not in cap.err
    assert [r.path for r in hosted.log] == [CHAT] * 4 + ["/v1/responses"]  # one try: no retry


def test_the_openai_prefix_given_a_chat_completions_body_says_to_use_openai_chat(
    hosted: OpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    hosted.responses_in_chat_shape = True  # /responses routed, answered in chat shape
    code = main([*SEARCH, "--meta-model", "openai:gpt-4o-mini"])
    cap = capsys.readouterr()
    assert code == 130
    assert cap.err.splitlines()[0] == (
        f"topology-studio: error: model 'openai:gpt-4o-mini' at {hosted.base_url}: the server "
        "has no OpenAI Responses API (/responses answered in another API's shape); the openai: "
        "prefix needs it: use openai-chat:gpt-4o-mini (chat completions, what Ollama, vLLM and "
        "llama.cpp speak)"
    )
    assert "TypeError" not in cap.err
    assert [(r.path, r.status) for r in hosted.log] == [(CHAT, 200)] * 4 + [("/v1/responses", 200)]


def test_a_chat_model_given_a_responses_body_names_the_prefixes(
    hosted: OpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    _designer_fails(hosted, ResponsesShape())
    code = main(SEARCH)
    cap = capsys.readouterr()
    assert code == 130
    assert cap.err.splitlines()[0] == (
        f"topology-studio: error: model 'openai-chat:gpt-4o-mini' at {hosted.base_url}: the "
        "reply to /chat/completions is not a chat completion (the openai-chat: prefix needs "
        "one): check that OPENAI_BASE_URL is the server's OpenAI-compatible /v1, or, for a "
        "server with only the Responses API, use openai:gpt-4o-mini"
    )
    assert [r.fault for r in hosted.log] == [None] * 4 + ["shape"]  # not retried
    # the run stopped resumable; resumed against a server that answers, no call is repeated
    hosted.reset()
    hosted.script(answer)
    assert main([*SEARCH, "--resume", resume_id(cap.err)]) == 0
    assert [(r.model, r.tools) for r in hosted.log] == [
        *designer_calls(),
        *[("gpt-4o", ())] * 4,
    ]


def _designer_fails(server: OpenAIServer, fault: object) -> None:
    """Every designer request meets `fault`; agents' requests are answered."""

    def script(body: dict[str, object]) -> object:
        reply = answer(body)  # type: ignore[arg-type]
        return fault if reply.tool_args is not None else reply

    server.script(script)  # type: ignore[arg-type]


FAULTS = {
    # fault -> (--set overrides, attempts at the designer's first call, the message's middle)
    "500": (
        Fail(500),
        [],
        12,  # waits 0.01, 0.02, 0.04, then 0.05 x 8: 0.47 s; a 12th wait would pass 0.5 s
        "server error (HTTP 500) after 12 attempts and 0.5 s of waiting: check the server "
        "(or the provider's status page), then resume",
    ),
    "429": (
        Fail(429, retry_after_ms=125),
        [],
        5,  # Retry-After 0.125 s x 4 = 0.5 s: the bound; a 5th wait would pass it
        "rate limited (HTTP 429) after 5 attempts and 0.5 s of waiting: wait, or lower "
        "[rate_limits.openai-chat] or raise [models] max_wait_s, then resume",
    ),
    "slow": (
        Slow(1.0),
        ["--set", "models.timeout_s=0.2", "--set", "models.max_wait_s=0.05"],
        3,  # waits 0.01 + 0.02; a third (0.04) would pass 0.05 s
        "no reply within the 0.2 s timeout after 3 attempts and 0.0 s of waiting: check the "
        "server, or raise [models] timeout_s, then resume",
    ),
    "cut": (
        CutOff(),
        [],
        12,
        "connection failed",
    ),
    "malformed": (
        Malformed(),
        [],
        12,
        "an unreadable reply (Failed to decode response as JSON",
    ),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_designer_fault_that_persists_interrupts_the_search_and_a_resume_repeats_no_call(
    hosted: OpenAIServer, capsys: pytest.CaptureFixture[str], fault: str
) -> None:
    answer_fault, overrides, attempts, middle = FAULTS[fault]
    _designer_fails(hosted, answer_fault)
    code = main([*SEARCH, *overrides])
    cap = capsys.readouterr()
    assert code == 130, cap.err
    first = cap.err.splitlines()[0]
    assert first.startswith(
        f"topology-studio: error: model 'openai-chat:gpt-4o-mini' at {hosted.base_url}: "
    )
    assert middle in first
    run_id = resume_id(cap.err)
    assert f"run {run_id} failed" not in cap.err
    designer = [r for r in hosted.log if r.tools]
    assert len(designer) == attempts
    assert [r.model for r in hosted.log if not r.tools] == ["gpt-4o-mini"] * 4  # the seed
    before = answered(hosted)

    hosted.reset()
    hosted.script(answer)  # the provider is back
    code = main(["search", "hosted", "--resume", run_id, *overrides])
    cap = capsys.readouterr()
    assert code == 0, cap.err
    after = answered(hosted)
    assert not set(before) & set(after)  # nothing answered before was asked again
    assert [(m, t) for m, t, _ in after] == [*designer_calls(), *[("gpt-4o", ())] * 4]
    assert kv(cap.out, "status") == "stopped (max_evaluations reached (2))"


def test_a_transient_429_is_waited_out_and_the_search_goes_on(
    hosted: OpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    hosted.queue(Fail(429, retry_after_ms=50), Fail(429, retry_after_ms=50))
    code = main(SEARCH)
    cap = capsys.readouterr()
    assert code == 0, cap.err
    assert hosted.statuses() == [429, 429, *[200] * 11]
    assert [r.user for r in hosted.log[:3]] == [QUESTIONS[0]] * 3  # the same call, again


def test_a_schema_failing_tool_call_gets_the_designers_output_retry(
    hosted: OpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = {"thought": "no spec"}
    calls = iter([Reply(tool_args=bad)])

    def script(body: dict[str, object]) -> object:
        reply = answer(body)  # type: ignore[arg-type]
        if reply.tool_args is not None:
            return next(calls, reply)
        return reply

    hosted.script(script)  # type: ignore[arg-type]
    code = main(SEARCH)
    cap = capsys.readouterr()
    assert code == 0, cap.err
    designer = [r for r in hosted.log if r.tools]
    assert len(designer) == 4  # the bad design, pydantic-ai's output retry, 2 reflexion passes
    retry = designer[1].body["messages"][-1]
    assert retry["role"] == "tool" and "spec" in str(retry["content"])
    assert DESIGN["spec"]["id"] in cap.out


def test_a_refused_connection_interrupts_the_search_and_a_resume_finishes_it(
    hosted: OpenAIServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    hosted.stop()  # nothing listens on the port: every connection is refused
    code = main(SEARCH)
    cap = capsys.readouterr()
    assert code == 130, cap.err
    assert "connection failed" in cap.err.splitlines()[0]
    assert "start the server, or fix OPENAI_BASE_URL, then resume" in cap.err
    assert os.environ["OPENAI_BASE_URL"] == hosted.base_url
    run_id = resume_id(cap.err)
    hosted.start()
    code = main(["search", "hosted", "--resume", run_id])
    cap = capsys.readouterr()
    assert code == 0, cap.err
    assert [r.model for r in hosted.log] == [
        *["gpt-4o-mini"] * 4,
        *["gpt-4o-mini"] * 3,
        *["gpt-4o"] * 4,
    ]
    assert len(set(answered(hosted))) == len(hosted.log)  # every call made once


def test_an_agent_fault_mid_candidate_keeps_what_was_scored_and_a_resume_repeats_no_call(
    hosted: OpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """The design's agent (`large`, gpt-4o) answers 2 of its 4 examples, then the server fails
    for good: the run stops (the seed's scores kept); the resume asks only the 2 left."""
    seen: list[str] = []

    def script(body: dict[str, object]) -> object:
        if body.get("model") == "gpt-4o":
            seen.append(str(body["messages"]))
            if len(seen) > 2:
                return Fail(502)
        return answer(body)  # type: ignore[arg-type]

    hosted.script(script)  # type: ignore[arg-type]
    code = main(SEARCH)
    cap = capsys.readouterr()
    assert code == 130, cap.err
    assert "server error (HTTP 502) after 12 attempts" in cap.err.splitlines()[0]
    run_id = resume_id(cap.err)
    shown = main(["show", run_id])
    out = capsys.readouterr().out
    assert shown == 0
    assert kv(out, "status").startswith("stopped (provider: model 'openai:gpt-4o' at ")
    assert re.search(r"^0\s+0\.5000\s+0\.000027", out, re.M)  # the seed's scores are kept
    before = answered(hosted)

    hosted.reset()
    hosted.script(answer)
    assert main(["search", "hosted", "--resume", run_id]) == 0
    capsys.readouterr()
    after = answered(hosted)
    assert not set(before) & set(after)
    assert [(r.model, r.user) for r in hosted.log] == [
        ("gpt-4o", QUESTIONS[2]),
        ("gpt-4o", QUESTIONS[3]),
    ]  # the designs are replayed from the journal, the 2 answered calls from the call cache


def test_the_rate_budget_holds_its_concurrency_under_429s(
    hosted: OpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """4 examples at once (search concurrency 4), one call at a time allowed for openai: the
    calls that meet a 429 keep their slot while they wait, so the server never answers two at
    once; without the budget it does."""
    slow = [Slow(0.05, answer({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": q}]}))
            for q in QUESTIONS]  # fmt: skip
    hosted.queue(Fail(429, retry_after_ms=30), *slow)
    argv = [*SEARCH, "--set", "search.concurrency=4", "--max-evaluations", "1"]
    assert main([*argv, "--rate-limit", "openai=::1"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert hosted.statuses() == [429, 200, 200, 200, 200]
    assert hosted.max_in_flight == 1
    hosted.reset()
    hosted.max_in_flight = 0
    hosted.queue(*slow)
    assert main([*argv, "--no-call-cache"]) == 0
    capsys.readouterr()
    assert hosted.max_in_flight == 4
