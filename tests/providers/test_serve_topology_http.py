"""`serve-topology PROBLEM --library RUN` over real HTTP: the library's topologies run the
problem's hosted agents through `OPENAI_BASE_URL`; a provider that keeps failing stops the
serving with the requests served so far printed, its message and exit 130."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from studio.cli import main
from tests.fixtures.openai_server import (
    Fail,
    OpenAIServer,
)
from tests.providers.hosted import answer, use_hosted

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
