"""A problem's `[models] base_url` with no `OPENAI_BASE_URL` in the environment: the CLI's
search and a search started from the studio (its manager, what the New search page calls) both
send every model call to it, and the environment's URL wins over it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from studio.cli import main
from studio.manager import SearchRequest, StudioManager
from tests.fixtures.openai_server import OpenAIServer
from tests.providers.hosted import use_hosted

EXPECTED = [
    *[("gpt-4o-mini", ())] * 4,  # the seed (small) on the 4 validation examples
    *[("gpt-4o-mini", ("final_result",))] * 3,  # the design and 2 reflexion passes
    *[("gpt-4o", ())] * 4,  # the design (large) on the 4
]


@pytest.fixture
def problem_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, openai_server: OpenAIServer
) -> OpenAIServer:
    """The hosted problem with `[models] base_url` the server's, the environment's unset."""
    folder = use_hosted(tmp_path, monkeypatch, openai_server)
    toml = folder / "problem.toml"
    toml.write_text(
        toml.read_text().replace("[models]\n", f'[models]\nbase_url = "{openai_server.base_url}"\n')
    )
    monkeypatch.setenv("OPENAI_BASE_URL", "")  # unset for the rule (restored after the test)
    return openai_server


def calls(server: OpenAIServer) -> list[tuple[str, tuple[str, ...]]]:
    return [(r.model, r.tools) for r in server.log]


def test_the_cli_search_uses_the_problems_base_url(
    problem_url: OpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["search", "hosted", "--strategy", "meta-agent", "--no-test"])
    assert code == 0, capsys.readouterr().err
    assert calls(problem_url) == EXPECTED


def test_a_search_started_from_the_studio_uses_the_problems_base_url(
    problem_url: OpenAIServer, tmp_path: Path
) -> None:
    m = StudioManager(tmp_path / "studio.duckdb", registry_root=tmp_path / "reg")
    try:
        run_id = m.start_search(
            SearchRequest(
                problem="hosted", strategy="meta_agent", n_generations=1, use_test_split=False
            )
        )
        bg = m.search(run_id)
        assert bg is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and bg.alive:
            time.sleep(0.05)
        assert bg.state == "completed", bg.error
    finally:
        m.close()
    assert calls(problem_url) == EXPECTED
