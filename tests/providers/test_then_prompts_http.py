"""`search --then-prompts --reflection-model openai-chat:...` over real HTTP: GEPA's reflection
model is reached through `OPENAI_BASE_URL` like every other model, its own calls are shown
apart from the task calls, and a persistent fault in it stops phase 2 with the provider's
message."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from genai_prices import Usage, calc_price

from studio.cli import main
from tests.fixtures.openai_server import (
    Fail,
    OpenAIServer,
)
from tests.providers.hosted import answer, kv, use_hosted

ARGS = [
    "search", "hosted", "--no-test",
    "--then-prompts", "--reflection-model", "openai-chat:gpt-4o-mini",
]  # fmt: skip
"""An evolutionary search of 2 evaluations keeps the seed (`small`, half right), so GEPA has
failures to reflect on: phase 2 evolves `small.system_prompt` on the 4 validation examples."""
REFLECTION = "I provided an assistant with the following instructions"


@pytest.fixture
def hosted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, openai_server: OpenAIServer
) -> OpenAIServer:
    use_hosted(tmp_path, monkeypatch, openai_server)
    return openai_server


def test_the_reflection_model_is_called_over_http_and_its_cost_shown_apart(
    hosted: OpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(ARGS)
    cap = capsys.readouterr()
    assert code == 0, cap.err
    reflections = [r for r in hosted.log if r.user.startswith(REFLECTION)]
    assert [(r.model, r.tools) for r in reflections] == [("gpt-4o-mini", ())]
    assert kv(cap.out, "model requests") == "12 task + 1 reflection"
    # every call here (the small model's answers, the reflection) is 100 input, 20 output
    one = calc_price(Usage(input_tokens=100, output_tokens=20), "gpt-4o-mini", provider_id="openai")
    assert one.total_price == Decimal("0.000027")
    assert kv(cap.out, "reflection_usd") == (
        "0.000027 (the reflection model's own calls; the candidates' task calls: 0.000324)"
    )  # 1 and 12 calls at $0.000027
    assert kv(cap.out, "reflection_calls") == (
        "1 request, 100 input + 20 output tokens "
        "(the reflection model's own, not in the candidates' figures)"
    )


def test_the_reflection_models_tokens_are_stored_and_shown_by_show_and_runs(
    hosted: OpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """Phase 2's run keeps the reflection model's requests and tokens; `show` prints them in
    its phase-2 section and `runs` on the phase-2 line, apart from the task calls."""
    from core.storage import DuckDBRunStore

    assert main(ARGS) == 0
    run_id = kv(capsys.readouterr().out, "parent run")
    with DuckDBRunStore(Path("runs.duckdb"), read_only=True) as store:
        second = store.phase_two_run(run_id)
        assert second is not None
        runs = store.list_runs().set_index("run_id")
        figures = ("design_requests", "design_input_tokens", "design_output_tokens")
        assert [int(runs.loc[second, c]) for c in figures] == [1, 100, 20]
        assert [int(runs.loc[run_id, c]) for c in figures] == [0, 0, 0]  # no designer
    assert main(["show", run_id]) == 0
    phase2 = capsys.readouterr().out.split("phase 2: prompts (GEPA) ==")[1]
    assert kv(phase2, "reflection_usd") == "0.000027"
    assert kv(phase2, "reflection_calls") == (
        "1 request, 100 input + 20 output tokens "
        "(the reflection model's own, not in the candidates' figures)"
    )
    assert main(["runs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[8:10] == ["design_usd", "design_tokens"]
    assert lines[1].split()[0] == run_id and lines[1].split()[8:10] == ["0.000000", "-"]
    assert lines[2].startswith("  phase 2 (prompts)")
    assert lines[2].split()[10:12] == ["0.000027", "100+20"]


def test_a_reflection_model_that_keeps_failing_stops_phase_2_with_the_providers_message(
    hosted: OpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    def script(body: dict[str, object]) -> object:
        reply = answer(body)  # type: ignore[arg-type]
        text = str(body["messages"][-1].get("content"))  # type: ignore[index]
        return Fail(503) if text.startswith(REFLECTION) else reply

    hosted.script(script)  # type: ignore[arg-type]
    code = main(ARGS)
    cap = capsys.readouterr()
    assert code == 130
    error, hint = cap.err.splitlines()[-2:]
    assert error.startswith(
        "topology-studio: error: phase 2 (prompts): model 'openai:gpt-4o-mini' at "
        f"{hosted.base_url}: server error (HTTP 503) after 12 attempts and 0.5 s of waiting"
    )  # (the model as pydantic-ai names the built reflection model)
    assert hint.startswith("interrupted in phase 2: the search run ")
    # the first reflection's 12 attempts, then phase 2 stopped: no other reflection was tried
    assert len([r for r in hosted.log if r.user.startswith(REFLECTION)]) == 12
    resumed = main(["search", "hosted", "--resume", hint.split("--resume ")[1].split()[0]])
    capsys.readouterr()
    assert resumed == 130  # still failing: stopped again, not failed
