"""`apply_result` for a phase-2 (prompt) result: each changed prompt's word-level diff first,
then the prompts written into the topology's inline agents; registered agents refused."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from core.errors import ApplyError, StaleTargetError
from core.ir import TopologySpec, parse_topology
from core.search.apply import apply_result
from core.search.prompt_diff import PromptDiff, word_diff
from core.search.registry import TopologyRegistry
from core.search.result import OptimizationResult

FIX = "Find the flaw. Answer in upper case."


def _spec(critic_prompt: str = "Find the flaw.", judge_prompt: str = "Judge it.") -> TopologySpec:
    return parse_topology(
        {
            "kind": "pipeline",
            "id": "root",
            "steps": [
                {"operation": {"kind": "agent_step", "id": "solve", "agent_name": "solver"}},
                {
                    "operation": {
                        "kind": "agent_step",
                        "id": "critique",
                        "inline_spec": {
                            "name": "critic",
                            "system_prompt": critic_prompt,
                            "output_schema": {"type": "string"},
                        },
                    }
                },
                {
                    "operation": {
                        "kind": "agent_step",
                        "id": "judge",
                        "inline_spec": {
                            "name": "judge",
                            "system_prompt": judge_prompt,
                            "output_schema": {"type": "string"},
                        },
                    }
                },
            ],
        }
    )


def _prompts(**texts: str) -> OptimizationResult:
    genes = {f"{agent}.system_prompt": text for agent, text in texts.items()}
    return OptimizationResult(
        best_candidate=dict(genes),
        best_decoded=dict(genes),
        best_score=1.0,
        pareto_candidates=[],
        history=[],
    )


def test_word_diff() -> None:
    assert word_diff("Solve it.", "Solve it. Show the answer.") == "Solve it. {+Show the answer.+}"
    assert word_diff(
        "Think step by step. Be brief.", "Think carefully step by step. Be exact."
    ) == ("Think {+carefully+} step by step. Be [-brief.-] {+exact.+}")
    assert word_diff("a  b\nc", "a b c") == ""


def test_dry_run_shows_each_prompt_diff_and_writes_nothing() -> None:
    target: dict[str, Any] = {"main": _spec().model_dump_json(indent=2)}
    snapshot = copy.deepcopy(target)
    (diff,) = apply_result(_prompts(critic=FIX, judge="Judge it."), target)
    assert target == snapshot
    assert (diff.gene_name, diff.changed, diff.written) == ("main", True, False)
    assert diff.prompts == (
        PromptDiff(
            gene_name="critic.system_prompt",
            agent="critic",
            before="Find the flaw.",
            after=FIX,
            words="Find the flaw. {+Answer in upper case.+}",
            changed=True,
        ),
        PromptDiff(
            gene_name="judge.system_prompt",
            agent="judge",
            before="Judge it.",
            after="Judge it.",
            words="",
            changed=False,
        ),
    )
    assert diff.after == _spec(critic_prompt=FIX)
    assert diff.unified.splitlines()[6:8] == [
        '-          "system_prompt": "Find the flaw."',
        f'+          "system_prompt": "{FIX}"',
    ]


def test_commit_writes_the_prompt_into_the_inline_agent() -> None:
    target: dict[str, Any] = {"main": _spec().model_dump_json(indent=2)}
    approved = apply_result(_prompts(critic=FIX), target)
    (diff,) = apply_result(_prompts(critic=FIX), target, dry_run=False, expected=approved)
    assert diff.written
    assert parse_topology(target["main"]) == _spec(critic_prompt=FIX)
    assert target["main"].startswith("{\n")  # written back in the target's own style
    # the same prompts again: nothing changes, nothing is written
    (again,) = apply_result(_prompts(critic=FIX), target, dry_run=False)
    assert (again.changed, again.written, again.prompts[0].changed) == (False, False, False)


def test_stale_target_refused_after_the_diff_was_approved() -> None:
    target: dict[str, Any] = {"main": _spec()}
    approved = apply_result(_prompts(critic=FIX), target)
    target["main"] = _spec(judge_prompt="Judge it twice.")
    with pytest.raises(StaleTargetError, match="gene 'main': the target changed"):
        apply_result(_prompts(critic=FIX), target, dry_run=False, expected=approved)
    assert target["main"] == _spec(judge_prompt="Judge it twice.")


def test_registry_target_versions_the_prompted_topology(tmp_path: Any) -> None:
    registry = TopologyRegistry(tmp_path / "reg")
    registry.write("main", _spec(), None)
    (diff,) = apply_result(_prompts(critic=FIX), registry, dry_run=False)
    assert (diff.base_version, diff.new_version) == (1, 2)
    assert registry.current("main") == (2, _spec(critic_prompt=FIX))


def test_registered_agents_and_absent_agents_are_refused_by_name() -> None:
    target: dict[str, Any] = {"main": _spec()}
    with pytest.raises(ApplyError) as info:
        apply_result(_prompts(critic=FIX, solver="Solve it better."), target, dry_run=False)
    assert str(info.value) == (
        "gene 'solver.system_prompt': agent 'solver' of topology 'main' is a registered agent "
        "(agent_name): its prompt lives in its registry's code, not in the topology, so it "
        "cannot be applied here; set it where 'solver' is registered"
    )
    assert target == {"main": _spec()}  # all or nothing: the critic's prompt was not written
    with pytest.raises(ApplyError) as info:
        apply_result(_prompts(planner="Plan."), target)
    assert str(info.value) == (
        "gene 'planner.system_prompt': topology 'main' runs no agent 'planner' (its agents: "
        "solver, critic, judge)"
    )


def test_the_topology_must_be_named_when_the_target_holds_several() -> None:
    target: dict[str, Any] = {"main": _spec(), "other": _spec()}
    with pytest.raises(ApplyError) as info:
        apply_result(_prompts(critic=FIX), target)
    assert str(info.value) == (
        "a prompt result applies to the one topology its prompts were evolved on: give "
        "topology=NAME (the target holds: main, other)"
    )
    (diff,) = apply_result(_prompts(critic=FIX), target, topology="other", dry_run=False)
    assert diff.gene_name == "other"
    assert target == {"main": _spec(), "other": _spec(critic_prompt=FIX)}
