"""Bringing your own problem with no API key: the documented no-key recipe runs, and agent errors
show in `search` and `evaluate` output.

The recipe documented in `core.problems` (an agent from a plain Python function through
pydantic-ai's `FunctionModel`, its price key declared free) is written out as it stands in the
docs and searched as `search ./adder` and as `search adder`. A variant whose agent raises on 3 of
its 10 validation examples shows that error rate in the search summary and the front table, and
`evaluate` prints the root cause (exception type and message), not the pipeline's wrapper.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_text import kv, section

import core.problems
from core.problems import load_problem
from studio.cli import main


def recipe() -> dict[str, str]:
    """The files of the documented no-key recipe, as the `core.problems` docs spell them."""
    doc = core.problems.__doc__ or ""
    part = doc.split("## A complete problem with no API key")[1].split("Evaluate a candidate")[0]
    files = dict(re.findall(r"`adder/([\w.]+)`[^\n]*:\n\n```\w+\n(.*?)```", part, re.S))
    assert sorted(files) == ["gold.jsonl", "problem.toml", "registries.py", "seed.json"]
    return files


def write(directory: Path, files: dict[str, str]) -> Path:
    directory.mkdir()
    for name, text in files.items():
        (directory / name).write_text(text)
    return directory


@pytest.fixture
def here(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("TOPOLOGY_STUDIO_DB", str(tmp_path / "runs.duckdb"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("ref", ["./adder", "adder"])
def test_the_documented_function_model_recipe_searches_by_path_and_by_name(
    here: Path, ref: str, capsys: pytest.CaptureFixture[str]
) -> None:
    write(here / "adder", recipe())
    code = main(["search", ref, "--seed", "1", "--max-evaluations", "2"])
    cap = capsys.readouterr()
    assert code == 0, cap.err
    assert kv(cap.out, "problem") == "adder"
    assert kv(cap.out, "status") == "stopped (max_evaluations reached (2))"
    # the documented agent answers every example right, for free
    front = section(cap.out, "Pareto front (validation)")
    header, *rows = (line.split() for line in front if line and not line.startswith("("))
    seed = dict(zip(header, rows[0], strict=False))  # "best" is blank off the best
    assert (seed["candidate"], seed["accuracy"], seed["cost_usd"]) == ("0", "1.0000", "0.000000")


SLOPPY = """
def sloppy(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if "(sloppy)" in str(getattr(messages[-1].parts[-1], "content", "")):
        raise ValueError("sloppy agent gave up")
    return add(messages, info)
"""


def sloppy_problem(root: Path) -> Path:
    """The recipe with agent `sloppy` (raises on inputs marked `(sloppy)`) as the seed, 20
    examples, 3 of the 10 validation ones marked."""
    files = recipe()
    files["registries.py"] = (
        files["registries.py"]
        .replace("\n\ndef build(", SLOPPY + "\n\ndef build(")
        .replace(
            'agents.register("adder", lambda: Agent(FunctionModel(add)), "Adds the two numbers.")',
            'agents.register("sloppy", lambda: Agent(FunctionModel(sloppy)), "Often fails.")',
        )
    )
    files["problem.toml"] = (
        files["problem.toml"]
        .replace('name = "adder"', 'name = "sloppy"')
        .replace('"function:add:"', '"function:sloppy:"')
        .replace("validation_size = 4", "validation_size = 10")
    )
    files["seed.json"] = files["seed.json"].replace('"adder"', '"sloppy"')
    gold = [
        {"id": f"q{i:02d}", "input": f"What is {i} + 1?", "expected": str(i + 1)} for i in range(20)
    ]
    files["gold.jsonl"] = "".join(json.dumps(g) + "\n" for g in gold)
    d = write(root / "sloppy", files)
    marked = {ex.id for ex in load_problem(d).splits["validation"][:3]}
    for g in gold:
        if g["id"] in marked:
            g["input"] += " (sloppy)"
    (d / "gold.jsonl").write_text("".join(json.dumps(g) + "\n" for g in gold))
    return d


def test_an_erroring_agent_shows_its_error_rate_in_the_search_summary_and_front(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sloppy_problem(here)
    code = main(["search", "sloppy", "--max-evaluations", "1", "--no-test"])
    cap = capsys.readouterr()
    assert code == 0, cap.err
    assert kv(cap.out, "errors") == "1 of 1 candidates: 0 (30.0% of its example runs)"
    front = section(cap.out, "Pareto front (validation)")
    header, *rows = (line.split() for line in front if line and not line.startswith("("))
    assert "error_rate" in header
    seed = dict(zip(header, rows[0], strict=False))  # "best" is blank off the best
    assert (seed["candidate"], seed["accuracy"], seed["error_rate"]) == ("0", "0.7000", "0.3000")


def test_evaluate_prints_the_root_cause_of_a_failing_step(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = sloppy_problem(here)
    code = main(["evaluate", "sloppy", str(d / "seed.json"), "--split", "validation"])
    cap = capsys.readouterr()
    assert code == 0, cap.err
    assert kv(cap.out, "error_rate") == "0.3000"
    assert kv(cap.out, "error") == "3 of 10 example runs: ValueError: sloppy agent gave up"
    failed = [line for line in cap.out.splitlines() if "  error  " in line]
    assert len(failed) == 3
    assert all(re.search(r" error +ValueError: sloppy agent gave up$", x) for x in failed)
