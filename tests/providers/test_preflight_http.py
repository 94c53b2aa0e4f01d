"""Refused before any work, in one line, with the loopback server listening: an unpriced agent
model, an unpriced (unknown) designer model, and a missing key (no base URL set). The server's
request log proves nothing was sent."""

from __future__ import annotations

from pathlib import Path

import pytest

from studio.cli import main
from tests.fixtures.openai_server import OpenAIServer
from tests.providers.hosted import use_hosted

SEARCH = ["search", "hosted", "--strategy", "meta-agent", "--no-test"]


@pytest.fixture
def hosted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, openai_server: OpenAIServer) -> Path:
    return use_hosted(tmp_path, monkeypatch, openai_server)


def refused(argv: list[str], capsys: pytest.CaptureFixture[str], server: OpenAIServer) -> str:
    code = main(argv)
    cap = capsys.readouterr()
    assert (code, cap.out, server.log) == (2, "", [])
    (line,) = cap.err.splitlines()
    return line


def test_an_agent_on_an_unknown_model_is_refused_at_load(
    hosted: Path, openai_server: OpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    registries = hosted / "registries.py"
    text = registries.read_text().replace('"openai-chat:gpt-4o"', '"openai-chat:gpt-nope"')
    registries.write_text(text)
    assert refused(SEARCH, capsys, openai_server) == (
        f"topology-studio: error: {hosted / 'problem.toml'}: field "
        "'models.prices.\"openai:gpt-nope\"': agent 'large' runs model 'openai:gpt-nope', which "
        'has no price: add [models.prices."openai:gpt-nope"] with input_usd_per_1k and '
        "output_usd_per_1k (USD per 1,000 tokens), or free = true"
    )


def test_an_unknown_designer_model_is_refused_before_the_seed(
    hosted: Path, openai_server: OpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    line = refused([*SEARCH, "--meta-model", "openai-chat:gpt-nope"], capsys, openai_server)
    assert line == (
        "topology-studio: error: designer model 'openai-chat:gpt-nope' has no price "
        "(unpriced_model: openai-chat:gpt-nope): add it to the problem's [models.prices] table, "
        "or price unknown models as zero"
    )


def test_a_missing_key_is_refused_before_the_seed(
    hosted: Path,
    openai_server: OpenAIServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("OPENAI_BASE_URL")  # (with a base URL, a local server needs no key)
    line = refused(SEARCH, capsys, openai_server)
    assert line == (
        f"topology-studio: error: {hosted / 'registries.py'}: field 'build': creating agent "
        "'large' failed: the OPENAI_API_KEY environment variable is not set (set it; a local "
        "server at OPENAI_BASE_URL needs none)"
    )
