"""The meta agent end to end on pydantic-ai function models (the search's acceptance: the
exact archive, history and recorded costs; field cases F2, F3, F5).

The designer is a `FunctionModel` playing a script: invalid JSON, a design, a reflexion that
changes it, a design naming an unknown function (debug retry fed the error and the allowed
names), and designs that never become valid. Every response reports 1,000 input and 100 output
tokens, priced at $0.001 / $0.002 per 1K: $0.0012 per designer request.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import models
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.profiles import JsonSchemaTransformer, ModelProfile
from pydantic_ai.usage import RequestUsage

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contracts"))

from strategy_contract import pipeline, toy_world  # noqa: E402

from core.errors import SearchError  # noqa: E402
from core.evaluation.pricing import ModelPrice, Pricer  # noqa: E402
from core.search._engine import minibatch_indices  # noqa: E402
from core.search.events import SearchEvent  # noqa: E402
from core.search.strategies import MetaAgentConfig, MetaAgentSearch, get_strategy  # noqa: E402

models.ALLOW_MODEL_REQUESTS = False

PER_REQUEST = 0.001 + 0.0002
"""USD per designer request: 1,000 input tokens at $0.001/1K plus 100 output at $0.002/1K."""
PRICER = Pricer({"function:designer": ModelPrice(input_usd_per_1k=0.001, output_usd_per_1k=0.002)})


def design(thought: str, *names: str) -> str:
    steps = [{"operation": {"kind": "function_step", "callable_name": n}} for n in names]
    return json.dumps({"thought": thought, "spec": {"kind": "pipeline", "steps": steps}})


class Designer:
    """A scripted designer: each call answers the next item ("" = an empty text reply)."""

    def __init__(self, script: Sequence[str]) -> None:
        self.script = list(script)
        self.prompts: list[str] = []
        self.calls = 0

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.calls += 1
        texts = [
            p.content
            for p in messages[-1].parts
            if isinstance(p, UserPromptPart) and isinstance(p.content, str)
        ]
        self.prompts.append(texts[-1] if texts else "")
        out = self.script.pop(0)
        part = TextPart("") if out == "" else ToolCallPart(info.output_tools[0].name, out)
        return ModelResponse(parts=[part], usage=RequestUsage(input_tokens=1000, output_tokens=100))

    def model(self, **kwargs: Any) -> FunctionModel:
        return FunctionModel(self, model_name="designer", **kwargs)


def meta(designer: Designer, **config: Any) -> MetaAgentSearch:
    return MetaAgentSearch(MetaAgentConfig(**config), model=designer.model(), pricer=PRICER)


def score_of(names: Sequence[str], ids: Sequence[int]) -> float:
    need = ["a"] * 4 + ["ab"] * 3 + ["abc"] * 3
    cost = 0.001 * names.count("a") + 0.002 * names.count("b") + 0.004 * names.count("c")
    latency = 10.0 * len(names)
    scores = [
        (1.0 if set(need[i]) <= set(names) else 0.0) - 10.0 * cost - 0.00002 * latency for i in ids
    ]
    return math.fsum(scores) / len(scores)


def test_meta_agent_end_to_end_exact_archive_history_and_costs() -> None:
    designer = Designer(
        [
            # generation 0: invalid JSON (pydantic-ai retries), a design, a reflexion that
            # changes it, a reflexion that keeps it
            "{not json",
            design("add b", "a", "b"),
            design("add c too", "a", "b", "c"),
            design("keep it", "a", "b", "c"),
            # generation 1: an unknown name, kept by both reflexions; the debug retry fixes it
            design("use zeta", "a", "zeta"),
            design("use zeta", "a", "zeta"),
            design("use zeta", "a", "zeta"),
            design("fixed", "b", "a"),
            # generation 2: never valid (F3): the design call fails (2 requests), debug retry 1
            # names an unknown function, debug retry 2 is not an object (2 requests)
            "{bad",
            "{bad",
            design("still zeta", "zeta"),
            "[]",
            "[]",
        ]
    )
    strategy = meta(designer, n_generations=3, minibatch_size=4, seed=42, debug_max=2)
    world = toy_world()
    events: list[SearchEvent] = []
    result = world.run(strategy, events=events)
    assert designer.script == [] and designer.calls == 13

    mb0, mb1 = minibatch_indices(10, 4, 42, 0), minibatch_indices(10, 4, 42, 1)
    assert (mb0, mb1) == ([1, 3, 5, 8], [0, 1, 7, 9])
    full = list(range(10))
    h = result.history
    assert [r.candidate_idx for r in h] == [0, 1, 2, 3]
    assert [r.status for r in h] == ["evaluated", "evaluated", "evaluated", "rejected"]
    assert [r.operator for r in h] == ["seed", "meta_agent", "meta_agent", "meta_agent"]
    assert [r.thought for r in h] == ["", "add c too", "fixed", ""]
    assert [r.design_requests for r in h] == [0, 4, 4, 5]
    # every response reports 1,000 input and 100 output tokens
    assert [(r.design_input_tokens, r.design_output_tokens) for r in h] == [
        (0, 0), (4000, 400), (4000, 400), (5000, 500)
    ]  # fmt: skip
    assert [r.design_cost_usd for r in h] == pytest.approx(
        [0.0, 4 * PER_REQUEST, 4 * PER_REQUEST, 5 * PER_REQUEST], rel=1e-12
    )
    # candidate 1 (a, b, c) beats the seed on minibatch 0 and is promoted
    assert h[1].parent_idx == 0
    assert h[1].minibatch_score == pytest.approx(score_of("abc", mb0), rel=1e-12)
    assert h[1].parent_minibatch_score == pytest.approx(score_of("a", mb0), rel=1e-12)
    assert h[1].promoted is True and h[1].split == "validation"
    assert h[1].score == pytest.approx(score_of("abc", full), rel=1e-12)
    # candidate 2 (b, a) is compared with the incumbent (candidate 1) on minibatch 1: kept
    # on the minibatch, then re-scored for the report (it is on the front of mixed scores)
    assert h[2].parent_idx == 1
    assert h[2].minibatch_score == pytest.approx(score_of("ba", mb1), rel=1e-12)
    assert h[2].parent_minibatch_score == pytest.approx(score_of("abc", mb1), rel=1e-12)
    assert h[2].promoted is False and h[2].rescored is True
    assert h[2].score == pytest.approx(score_of("ba", full), rel=1e-12)
    # candidate 3 never became valid: rejected with its reason and its full cost (F3)
    assert h[3].reason is not None
    assert h[3].reason == (
        "no_valid_design: still invalid after 2 debug retries: invalid_design: invalid design: "
        "a design must be a JSON object, got list"
    )
    assert h[3].spec_json == "[]"

    archive = result.raw["archive"]
    assert result.raw["archive_candidates"] == [0, 1, 2]
    assert [e.spec_hash for e in archive.entries] == [r.spec_hash for r in h[:3]]
    assert [e.split for e in archive.entries] == ["validation"] * 3
    assert [e.generation for e in archive.entries] == [-1, 0, 1]
    assert [e.thought for e in archive.entries] == ["", "add c too", "fixed"]
    assert [e.parent_idx for e in archive.entries] == [None, 0, 1]
    assert [e.aggregate_score for e in archive.entries] == pytest.approx(
        [score_of("a", full), score_of("abc", full), score_of("ba", full)], rel=1e-12
    )
    assert result.raw["best_idx"] == 1
    assert result.best_decoded == {"letters": pipeline("a", "b", "c")}
    assert result.raw["pareto_idx"] == [0, 1, 2]
    used = result.raw["budget_used"]
    assert used["design_usd"] == pytest.approx(13 * PER_REQUEST, rel=1e-12)
    assert used["usd"] == pytest.approx(used["eval_usd"] + 13 * PER_REQUEST, rel=1e-12)
    assert (
        used["design_requests"],
        used["design_input_tokens"],
        used["design_output_tokens"],
    ) == (13, 13_000, 1_300)

    proposed = [e for e in events if e.type == "candidate_proposed"]
    assert [e.design_cost_usd for e in proposed] == [r.design_cost_usd for r in h]
    assert [e.design_requests for e in proposed] == [0, 4, 4, 5]
    assert [e.design_input_tokens for e in proposed] == [0, 4000, 4000, 5000]
    assert [e.design_output_tokens for e in proposed] == [0, 400, 400, 500]
    assert proposed[3].status == "rejected" and proposed[3].reason == h[3].reason

    # the prompts: the design prompt shows the archive with metrics; the debug retry gets the
    # full hydration error with the JSON path and the allowed names
    gen1_design = designer.prompts[4]
    assert "Generation 1." in gen1_design and "candidate 1 (generation 0, validation" in gen1_design
    assert "thought: add c too" in gen1_design
    reflexion = designer.prompts[2]
    assert reflexion.startswith("Reflect on your design.")
    debug = designer.prompts[7]
    assert debug.startswith("Your design cannot be used. The error:\nunknown_names: ")
    assert "$.steps[1].operation.callable_name" in debug and "'zeta'" in debug
    assert "callables with role step: a, b, c" in debug
    assert "Depth limit: 3." in debug
    # pydantic-ai fed the invalid JSON back before the second request of generation 0
    assert designer.prompts[1] == ""


def test_f3_invalid_twice_then_valid_costs_every_attempt() -> None:
    designer = Designer(["{x", "{y", design("ok", "a", "b")])
    strategy = meta(designer, n_generations=1, reflexion_passes=0, debug_max=3)
    result = toy_world().run(strategy)
    record = result.history[1]
    assert record.status == "evaluated"
    assert record.design_requests == 3
    assert record.design_cost_usd == pytest.approx(3 * PER_REQUEST, rel=1e-12)
    # the debug prompt repeated the task (no conversation to continue) and gave the error
    assert designer.prompts[2].startswith("Generation 0.")
    assert (
        "Your design cannot be used. The error:\ninvalid_design: invalid JSON"
        in (designer.prompts[2])
    )


def test_f3_never_valid_is_recorded_with_its_reason_and_full_cost() -> None:
    designer = Designer(["{x"] * 8)
    strategy = meta(designer, n_generations=1, reflexion_passes=2, debug_max=3)
    events: list[SearchEvent] = []
    result = toy_world().run(strategy, events=events)
    record = result.history[1]
    assert record.status == "rejected"
    assert record.design_requests == 8  # 4 designer calls of 2 requests each
    assert record.design_cost_usd == pytest.approx(8 * PER_REQUEST, rel=1e-12)
    assert record.reason is not None and record.reason.startswith(
        "no_valid_design: still invalid after 3 debug retries: invalid_design: invalid JSON"
    )
    assert len(result.raw["archive"]) == 1  # nothing of it reached the archive
    assert not any(e.type == "example_evaluated" and e.candidate_idx == 1 for e in events)


def test_f5_a_designer_returning_empty_content_is_rejected_and_the_run_goes_on() -> None:
    designer = Designer([""] * 12)
    strategy = meta(designer, n_generations=2, reflexion_passes=1, debug_max=2)
    result = toy_world().run(strategy)
    assert [r.status for r in result.history] == ["evaluated", "rejected", "rejected"]
    for record in result.history[1:]:
        assert record.reason is not None
        assert "empty_design: the designer returned no design" in record.reason
        assert record.design_requests == 6
    assert result.raw["status"] == "completed"
    assert result.raw["best_idx"] == 0


class _Broken(JsonSchemaTransformer):
    def transform(self, schema: dict[str, Any]) -> dict[str, Any]:
        raise UserError("this provider cannot take recursive schemas")


def test_f2_a_provider_that_cannot_take_the_schema_fails_before_any_paid_call() -> None:
    designer = Designer([design("never asked", "a")])
    strategy = MetaAgentSearch(
        MetaAgentConfig(n_generations=1),
        model=designer.model(profile=ModelProfile(json_schema_transformer=_Broken)),
        pricer=PRICER,
    )
    world = toy_world()
    events: list[SearchEvent] = []
    with pytest.raises(SearchError, match="cannot take the meta agent's output schema"):
        world.run(strategy, events=events)
    assert designer.calls == 0 and events == [] and world.calls == []


def test_an_unpriced_designer_model_fails_fast() -> None:
    strategy = get_strategy("meta-agent", {"n_generations": 1}, model="openai:gpt-unpriced-x")
    world = toy_world()
    with pytest.raises(SearchError, match="has no price"):
        world.run(strategy)
    assert world.calls == []


def test_resume_replays_the_recorded_designs_without_calling_the_designer() -> None:
    script = [design("add b", "a", "b"), design("add c", "a", "b", "c")]
    first = Designer(list(script))
    events: list[SearchEvent] = []
    reference = toy_world().run(
        meta(first, n_generations=2, reflexion_passes=0), events=events, run_id="m1"
    )
    # died after generation 0's snapshot
    snaps = [i for i, e in enumerate(events) if e.type == "archive_snapshot"]
    prefix = events[: snaps[1] + 1]
    second = Designer([design("add c", "a", "b", "c")])
    resumed = toy_world().run(
        meta(second, n_generations=2, reflexion_passes=0), resume_from=prefix, run_id="m1"
    )
    assert second.calls == 1  # only generation 1 was designed again
    assert [r.model_dump() for r in resumed.history] == [r.model_dump() for r in reference.history]
    used = resumed.raw["budget_used"]
    assert used["design_usd"] == reference.raw["budget_used"]["design_usd"]
    # the replayed design's requests and tokens count as its cost does
    assert (used["design_requests"], used["design_input_tokens"]) == (2, 2000)
    assert used["usd_spent"] < reference.raw["budget_used"]["usd_spent"]


def test_meta_agent_config_values_are_checked() -> None:
    assert MetaAgentConfig() == MetaAgentConfig(
        n_generations=10,
        archive_strategy="top_k",
        archive_size=5,
        reflexion_passes=2,
        debug_max=3,
        minibatch_size=5,
        seed=42,
    )
    for bad in (
        {"n_generations": 0},
        {"archive_size": 0},
        {"reflexion_passes": -1},
        {"debug_max": -1},
        {"minibatch_size": 0},
        {"archive_strategy": "best"},
    ):
        with pytest.raises(ValueError):
            MetaAgentConfig(**bad)
    with pytest.raises(ValueError, match="needs a designer model"):
        get_strategy("meta_agent")
    with pytest.raises(ValueError, match="unknown strategy 'genetic'"):
        get_strategy("genetic")


def test_a_failing_designer_model_call_fails_the_run_with_a_clear_error() -> None:
    def broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise ConnectionError("provider unreachable")

    strategy = MetaAgentSearch(
        MetaAgentConfig(n_generations=2),
        model=FunctionModel(broken, model_name="designer"),
        pricer=PRICER,
    )
    events: list[SearchEvent] = []
    with pytest.raises(SearchError, match="the designer's model call failed") as info:
        toy_world().run(strategy, events=events)
    assert isinstance(info.value.__cause__, ConnectionError)
    assert events[-1].type == "run_finished" and events[-1].status == "failed"
    assert "provider unreachable" in events[-1].reason


def test_the_designer_is_shown_names_roles_schema_constraints_depth_and_kinds() -> None:
    seen: list[str] = []

    def designer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(info.instructions or "")
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, design("x", "c"))])

    world = toy_world()
    world.gene = world.gene.model_copy(update={"constraints": "use at most three steps"})
    world.roles = {"step": ["a", "b"], "merge": ["c"]}
    strategy = MetaAgentSearch(
        MetaAgentConfig(n_generations=1, reflexion_passes=0),
        model=FunctionModel(designer, model_name="designer"),
        pricer=PRICER,
    )
    world.run(strategy)
    text = seen[0]
    assert "- a [step]: appends 'a'" in text
    assert "- c [merge]: appends 'c'" in text
    assert "- merge: parallel.merge" in text
    assert "Agents (use in agent_step.agent_name" in text and "- (none)" in text
    assert "nesting depth at most 3" in text
    assert "allowed step kinds: agent_step, function_step" in text
    assert "- use at most three steps" in text
    assert '"refinement_loop"' in text and '"$defs"' in text  # the JSON schema
