"""How a loaded problem gets the library: ballots or its own state, `[answer]`, opting out."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from core.errors import ProblemError
from core.ir import parse_topology
from core.problems import load_problem

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "problems"))
from test_problem_loader import REGISTRIES, TOML, make_toy  # noqa: E402

OWN_STATE = REGISTRIES.replace(
    "from core.problems import ProblemContext, ProblemParts",
    "from core.problems import ProblemContext, ProblemParts\n"
    "from core.ir.dataflow import EffectTable, NameEffect",
).replace(
    'roles={"step": ["upper"], "condition": ["is_four"]},',
    'roles={"step": ["upper"], "condition": ["is_four"]},\n'
    '        effects=EffectTable(names={"upper": NameEffect(adds_candidates=0)}),\n'
    "        INPUT_TEXT",
)

GOLD = [
    {"id": f"q{i}", "input": "x" * (i + 1) + ("?" if i % 2 else ""), "expected": "4"}
    for i in range(5)
]


def test_a_problem_with_its_own_state_gets_only_input_features_through_its_hook(
    tmp_path: Path,
) -> None:
    plain = make_toy(tmp_path / "a", registries=OWN_STATE.replace("INPUT_TEXT", ""), gold=GOLD)
    p = load_problem(plain)
    # nothing it could not read: no ballot entry, no feature without an input-text hook
    assert p.callable_registry.names() == ["is_four", "upper"]
    assert p.hydration_hooks is None
    hooked = make_toy(
        tmp_path / "b",
        registries=OWN_STATE.replace("INPUT_TEXT", "input_text=lambda s: str(s),"),
        gold=GOLD,
    )
    q = load_problem(hooked, overrides={"gold.validation_size": 4})
    assert q.hydration_hooks is None
    features = sorted(set(q.callable_registry.names()) - {"is_four", "upper"})
    assert features == sorted(n for n in features if n.startswith("input_"))
    assert "input_is_long" in features
    assert q.roles["condition"][0] == "is_four"  # its own names first
    assert q.effects.names["upper"].adds_candidates == 0


def test_standard_library_false_registers_nothing(tmp_path: Path) -> None:
    toml = TOML.replace("[search]\n", "[search]\nstandard_library = false\n")
    p = load_problem(make_toy(tmp_path, toml=toml))
    assert p.callable_registry.names() == ["is_four", "upper"]
    assert p.hydration_hooks is None
    assert p.effects.names == {}


def test_an_unknown_answer_key_names_the_file_and_field(tmp_path: Path) -> None:
    toml = TOML + '\n[answer]\nfield = "label"\nnormalise = "text"\n'
    with pytest.raises(ProblemError) as info:
        load_problem(make_toy(tmp_path, toml=toml))
    assert info.value.field == "answer.normalise"
    assert str(info.value.file).endswith("problem.toml")
    bad = TOML.replace("[params]", '[answer]\nnormalization = "fuzzy"\n\n[params]')
    with pytest.raises(ProblemError) as info2:
        load_problem(make_toy(tmp_path / "b", toml=bad))
    assert info2.value.field == "answer.normalization"


def test_a_problems_own_step_receives_the_plain_output_not_a_ballot(tmp_path: Path) -> None:
    p = load_problem(make_toy(tmp_path))
    assert p.hydration_hooks is not None
    spec: dict[str, Any] = {
        "kind": "pipeline",
        "steps": [
            {"operation": {"kind": "agent_step", "agent_name": "echo"}},
            {"operation": {"kind": "function_step", "callable_name": "upper"}},
        ],
    }
    result = asyncio.run(p.evaluator().evaluate(parse_topology(spec), p.splits["validation"]))
    assert [r.output_summary for r in result.results] == ["4", "4"]
    assert result.accuracy == 1.0
    # the toy has a step of its own, which may answer: topologies without an agent stay
    assert p.effects.answer_needs_agent is False


def test_an_agents_only_problem_needs_an_agent_for_an_answer(tmp_path: Path) -> None:
    registries = REGISTRIES.replace('roles={"step": ["upper"], "condition": ["is_four"]},', "")
    registries = registries.replace(
        '    callables.register("upper", upper, "Upper-case the text.")\n', ""
    )
    registries = registries.replace(
        '    callables.register("is_four", is_four, "The text is 4.")\n', ""
    )
    p = load_problem(make_toy(tmp_path, registries=registries))
    # a topology of the library's functions alone answers nothing: rejected statically
    assert p.effects.answer_needs_agent is True
    assert "upper" not in p.callable_registry
