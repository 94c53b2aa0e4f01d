"""Record once, search offline: `export RUN --replay DIR --problem PROBLEM`.

A meta-agent search of the hosted problem (30 examples: 15 validation, 15 held-out) records its
calls against the loopback server; the export writes a replay problem from them; with the
server stopped, a search of the export reproduces the recorded candidates' figures exactly, and
no request reaches any server.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from studio.cli import main
from tests.fixtures.openai_server import (
    OpenAIServer,
)
from tests.providers.hosted import use_hosted


@pytest.fixture
def hosted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, openai_server: OpenAIServer
) -> OpenAIServer:
    use_hosted(tmp_path, monkeypatch, openai_server, n=30, validation=15)
    return openai_server


def front(text: str) -> dict[str, tuple[str, ...]]:
    """The validation front's rows by topology (`seed` / `large`), with accuracy, cost_usd,
    latency_ms, n_agents, depth and error_rate."""
    part = text.split("== Pareto front (validation) ==\n")[1].split("\n(")[0]
    header, *rows = (line.split() for line in part.splitlines())
    assert header[:7] == [
        "candidate", "accuracy", "cost_usd", "latency_ms", "n_agents", "depth", "error_rate",
    ]  # fmt: skip
    by_idx = {row[0]: tuple(row[1:7]) for row in rows}
    return {"small": by_idx["0"], "large": by_idx["1"]}


DOC = Path(__file__).resolve().parents[2] / "docs" / "real-providers.md"


def documented_commands() -> list[list[str]]:
    """The three commands of the docs' "Record once, search offline" block, as argv lists
    (comments dropped, `topology-studio` removed)."""
    text = DOC.read_text(encoding="utf-8")
    part = text.split("## Record once, search offline")[1].split("```bash\n")[1].split("```")[0]
    lines = [line.split("#")[0].split() for line in part.splitlines()]
    assert all(line[0] == "topology-studio" for line in lines if line)
    return [line[1:] for line in lines if line]


def test_a_recorded_run_exported_as_replay_is_searched_offline_with_the_same_figures(
    hosted: OpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the docs' commands, run as written (RUN is the first one's run id)
    paid, export, offline_search = documented_commands()
    assert paid == ["search", "hosted", "--strategy", "meta-agent"]
    assert main(paid) == 0
    recorded = capsys.readouterr().out
    run_id = re.findall(r"^run:\s+(\S+)", recorded, re.M)[0]
    # seed and design on the 15 validation examples, both on the 15 held-out, 3 designer calls
    assert len(hosted.log) == 15 + 15 + 15 + 15 + 3

    offline = tmp_path / "offline"
    assert export == ["export", "RUN", "--replay", "offline", "--problem", "hosted"]
    assert main([run_id if a == "RUN" else a for a in export]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "replay problem: offline (60 recorded calls)",
        "search it offline: topology-studio search offline",
    ]
    lines = [json.loads(x) for x in (offline / "replay.jsonl").read_text().splitlines()]
    assert sorted({(x["agent"], x["input_tokens"], x["output_tokens"]) for x in lines}) == [
        ("large", 120, 30),
        ("small", 100, 20),
    ]
    assert {x["id"] for x in lines} == {f"q{i}" for i in range(1, 31)}
    toml = (offline / "problem.toml").read_text()
    assert "validation_size = 15" in toml and 'split_salt = ""' in toml

    hosted.stop()  # nothing listens now: an offline search that called out would fail
    n_requests = len(hosted.log)
    assert offline_search == [
        "search",
        "./offline",
        "--strategy",
        "exhaustive",
        "--max-evaluations",
        "5",
    ]
    code = main(offline_search)
    searched = capsys.readouterr().out
    assert code == 0
    assert len(hosted.log) == n_requests
    assert front(searched) == front(recorded)
    assert front(recorded)["large"][:2] == ("1.0000", "0.000600")  # genai-prices' gpt-4o
    assert "no money spent" in searched


def test_export_replay_needs_the_runs_own_problem(
    hosted: OpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["search", "hosted", "--strategy", "meta-agent", "--no-test"]) == 0
    run_id = re.findall(r"^run:\s+(\S+)", capsys.readouterr().out, re.M)[0]
    assert main(["export", run_id, "--replay", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "topology-studio: error: export --replay needs --problem PROBLEM: the problem the run "
        "searched (its gold examples and agents; a run record never chooses the code to load)"
    ]
