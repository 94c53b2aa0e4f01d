"""`serve-topology PROBLEM --library RUN` over real HTTP: the library's topologies run the
problem's hosted agents through `OPENAI_BASE_URL`; a provider that keeps failing stops the
serving with the requests served so far printed, its message and exit 130."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from studio.cli import main
from tests.fixtures.openai_server import Fail, OpenAIServer, output_tool
from tests.providers.hosted import answer, kv, use_hosted

REQUESTS = (
    '{"question": "What is 2 + 4?"}\n'
    '{"question": "What is 7 + 1?", "budget_usd": 0.0001}\n'
    '{"question": "What is 2 + 4?"}\n'
)


@pytest.fixture
def library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, openai_server: OpenAIServer
) -> tuple[OpenAIServer, str]:
    """The hosted problem searched over HTTP (its front: small, large), the log then cleared."""
    use_hosted(tmp_path, monkeypatch, openai_server)
    (tmp_path / "requests.jsonl").write_text(REQUESTS)
    return openai_server, ""


def _search(capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["search", "hosted", "--strategy", "meta-agent", "--no-test"]) == 0
    return re.findall(r"^run:\s+(\S+)", capsys.readouterr().out, re.M)[0]


def test_serving_runs_the_librarys_hosted_agents_over_http(
    library: tuple[OpenAIServer, str], capsys: pytest.CaptureFixture[str]
) -> None:
    server, _ = library
    run_id = _search(capsys)
    server.reset()
    code = main(["serve-topology", "hosted", "--library", run_id, "--requests", "requests.jsonl"])
    out = capsys.readouterr().out
    assert code == 0
    # the best entry (large) for the gold question, the cheap one (small) under the $0.0001
    # budget, then the same topology from the cache; the best single topology on the question
    # with no gold answer, for the comparison
    assert [(r.model, r.user) for r in server.log] == [
        ("gpt-4o", "What is 2 + 4?"),
        ("gpt-4o-mini", "What is 7 + 1?"),
        ("gpt-4o", "What is 7 + 1?"),
        ("gpt-4o", "What is 2 + 4?"),
    ]
    rows = [line.split() for line in out.splitlines()[1:4]]
    assert [(r[2], r[3], r[4], r[6]) for r in rows] == [
        ("2", "miss", "6", "0.000600"),  # genai-prices: gpt-4o, 120 in + 30 out
        ("1", "miss", "9", "0.000027"),  # gpt-4o-mini, 100 in + 20 out (the small model errs)
        ("2", "hit", "6", "0.000600"),
    ]


def test_a_provider_that_keeps_failing_stops_serving_with_its_message(
    library: tuple[OpenAIServer, str], capsys: pytest.CaptureFixture[str]
) -> None:
    server, _ = library
    run_id = _search(capsys)
    server.reset()
    served = [0]

    def script(body: dict[str, object]) -> object:
        served[0] += 1
        return answer(body) if served[0] == 1 else Fail(503)  # type: ignore[arg-type]

    server.script(script)  # type: ignore[arg-type]
    code = main(["serve-topology", "hosted", "--library", run_id, "--requests", "requests.jsonl"])
    cap = capsys.readouterr()
    assert code == 130
    assert cap.out.splitlines()[1].split()[:5] == ["1", cap.out.split()[10], "2", "miss", "6"]
    errors = cap.err.splitlines()
    assert any(
        line.startswith(
            f"topology-studio: error: model 'openai:gpt-4o-mini' at {server.base_url}: "
            "server error (HTTP 503) after 12 attempts"
        )
        for line in errors
    ), errors
    assert errors[-2:] == [
        "topology-studio: error: interrupted",
        "interrupted after 1 request(s), printed above; the rest were not served",
    ]
    assert [r.status for r in server.log] == [200] + [503] * 12


DESIGNED = [
    "serve-topology",
    "hosted",
    "--requests",
    "requests.jsonl",
    "--designer-model",
    "openai-chat:gpt-4o-mini",
]


def test_a_model_designer_designs_each_uncached_request_over_http(
    library: tuple[OpenAIServer, str], capsys: pytest.CaptureFixture[str]
) -> None:
    server, _ = library
    run_id = _search(capsys)
    server.reset()
    code = main([*DESIGNED, "--library", run_id])
    out = capsys.readouterr().out
    assert code == 0
    # one design per question the cache lacks (its answer: the large model, which is the
    # library's entry 2 and its best single topology, so the comparison adds no request);
    # the repeated question is a hit, served with no design
    assert [(r.model, r.tools, r.user.splitlines()[0]) for r in server.log] == [
        ("gpt-4o-mini", ("final_result",), "Request: What is 2 + 4?"),
        ("gpt-4o", (), "What is 2 + 4?"),
        ("gpt-4o-mini", ("final_result",), "Request: What is 7 + 1?"),
        ("gpt-4o", (), "What is 7 + 1?"),
        ("gpt-4o", (), "What is 2 + 4?"),
    ]
    # the request's budget is told to the model, the library with its figures too
    assert server.log[2].user.splitlines()[1] == (
        "Limits for this request: cost at most $0.000100."
    )
    assert "[2] " in server.log[0].user and '"agent_name":"large"' in server.log[0].user
    rows = [line.split() for line in out.splitlines()[1:4]]
    assert [(r[2], r[3], r[6]) for r in rows] == [
        ("2", "miss", "0.000600"),  # the served topology only: gpt-4o, 120 in + 30 out
        ("2", "miss", "0.000600"),  # (the rule would have picked entry 1 under this budget)
        ("2", "hit", "0.000600"),
    ]
    # genai-prices for gpt-4o-mini: 900 in x $0.15/M + 80 out x $0.60/M = $0.000183 a design
    assert kv(out, "designer") == (
        "openai:gpt-4o-mini: 2 requests, 1800 input + 160 output tokens, $0.000366 "
        "(not in the served cost)"
    )
    assert kv(out, "fallbacks") == "0 of 2 designed (the library's best entry served)"
    assert kv(out, "served").startswith("accuracy 1.0000 over 2 scored, cost $0.001800 in total")


def test_a_designer_that_keeps_failing_serves_the_fallback_with_the_providers_line(
    library: tuple[OpenAIServer, str], capsys: pytest.CaptureFixture[str]
) -> None:
    server, _ = library
    run_id = _search(capsys)
    server.reset()
    server.script(lambda body: Fail(503) if output_tool(body) else answer(body))
    code = main([*DESIGNED, "--library", run_id])
    cap = capsys.readouterr()
    assert code == 0
    # [models]: waits 0.01, 0.02, 0.04, then 0.05 while they add up to at most 0.5 s: 12
    # attempts a design; a fallback is not cached, so the repeated question is designed again
    assert [r.status for r in server.log if r.tools] == [503] * 36
    assert [(r.model, r.user) for r in server.log if not r.tools] == [
        ("gpt-4o", "What is 2 + 4?"),
        ("gpt-4o", "What is 7 + 1?"),
        ("gpt-4o", "What is 2 + 4?"),
    ]
    rows = [line.split() for line in cap.out.splitlines()[1:4]]
    assert [(r[2], r[3], r[4], r[8]) for r in rows] == [
        ("2", "miss", "6", "ok"),
        ("2", "miss", "8", "ok"),
        ("2", "miss", "6", "ok"),
    ]
    notes = [line for line in cap.err.splitlines() if "the designer failed" in line]
    assert notes == [
        f"requests line {n}: the designer failed, the library's best "
        "entry served it: the designer agent raised ProviderError: model 'openai:gpt-4o-mini' "
        f"at {server.base_url}: server error (HTTP 503) after 12 attempts and 0.5 s of "
        "waiting: check the server (or the provider's status page), then resume"
        for n in (1, 2, 3)
    ]
    assert kv(cap.out, "designer") == (
        "openai:gpt-4o-mini: 0 requests, 0 input + 0 output tokens, $0.000000 "
        "(not in the served cost)"
    )
    assert kv(cap.out, "fallbacks") == "3 of 3 designed (the library's best entry served)"


def test_an_unpriced_designer_model_is_refused_before_any_request(
    library: tuple[OpenAIServer, str], capsys: pytest.CaptureFixture[str]
) -> None:
    server, _ = library
    run_id = _search(capsys)
    server.reset()
    argv = [*DESIGNED[:-1], "openai-chat:gpt-nope", "--library", run_id]
    assert main(argv) == 2
    cap = capsys.readouterr()
    assert (cap.out, server.log) == ("", [])
    assert cap.err.splitlines() == [
        "topology-studio: error: --designer-model 'openai-chat:gpt-nope' has no price "
        "(unpriced_model: openai:gpt-nope): add it to the problem's [models.prices] table"
    ]
