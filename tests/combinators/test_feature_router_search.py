"""The default search on a replayed problem with only agents, whose hidden input feature (the
input's length) decides which agent is right: its front holds the router on the library's
`input_is_long` between the two specialists, at its exact accuracy and cost."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from core.evaluation.metrics import GoldExample
from core.evaluation.pricing import ModelPrice
from core.ir import parse_topology
from core.ir.canonical import canonical_dict
from core.problems import load_problem
from core.problems.replay_file import ReplayLine, replay_table, write_replay_problem
from core.problems.splits import split_examples
from core.search.engine import build_search

N = 40
VALIDATION = 20


def _gold_and_long() -> tuple[list[GoldExample], set[str]]:
    """40 tickets; half of the validation split and half of the test split are long (a ticket
    number, then 30 words), the rest short (the ticket number alone)."""
    ids = [f"e{i:02d}" for i in range(N)]
    plain = [GoldExample(id=i, input=i, expected="x") for i in ids]
    splits = split_examples(plain, validation_size=VALIDATION)
    long_ids: set[str] = set()
    for part in splits.values():
        long_ids.update(str(e.id) for e in part[: len(part) // 2])
    gold = [
        GoldExample(
            id=i,
            input=f"ticket {i}: " + "word " * 30 if i in long_ids else f"ticket {i}",
            expected="refund" if int(i[1:]) % 2 else "bug",
        )
        for i in ids
    ]
    return gold, long_ids


def _write(root: Path) -> tuple[Path, set[str]]:
    """`short_pro` ($0.01 a call) is right on short tickets only, `long_pro` ($0.02) on long
    ones only, `all_round` ($0.10) everywhere but on the first five validation tickets."""
    gold, long_ids = _gold_and_long()
    validation = split_examples(gold, validation_size=VALIDATION)["validation"]
    all_round_wrong = {str(e.id) for e in validation[:5]}
    lines: list[ReplayLine] = []
    for ex in gold:
        is_long = str(ex.id) in long_ids
        right = {
            "short_pro": not is_long,
            "long_pro": is_long,
            "all_round": str(ex.id) not in all_round_wrong,
        }
        for agent, ok in right.items():
            lines.append(
                ReplayLine(
                    id=str(ex.id),
                    agent=agent,
                    output=ex.expected if ok else "other",
                    input_tokens=10,
                    output_tokens=0,
                    latency_ms=100.0,
                )
            )
    prices = {"short_pro": 1.0, "long_pro": 2.0, "all_round": 10.0}
    directory = write_replay_problem(
        root / "p",
        name="p",
        gold=gold,
        replay=replay_table(lines),
        prices={
            a: ModelPrice(input_usd_per_1k=p, output_usd_per_1k=0.0) for a, p in prices.items()
        },
    )
    return directory, long_ids


def _agent(name: str) -> dict[str, Any]:
    return {"kind": "agent_step", "agent_name": name}


def test_the_default_search_finds_the_length_router_between_the_specialists(
    tmp_path: Path,
) -> None:
    directory, long_ids = _write(tmp_path)
    problem = load_problem(directory)
    validation = [str(e.id) for e in problem.splits["validation"]]
    assert len(validation) == VALIDATION
    assert len(long_ids & set(validation)) == VALIDATION // 2
    # the ticket number's digits are in every input: length is the one non-constant feature
    assert [c for c in problem.roles["condition"] if c.startswith("input_")] == ["input_is_long"]
    run = build_search(problem, handle_sigint=False, use_test_split=False)
    result = asyncio.run(run.run())
    front = [
        (
            e.objective("accuracy"),
            e.objective("cost_usd"),
            canonical_dict(parse_topology(json.loads(e.spec_json))),
        )
        for e in result.raw.pareto()
    ]
    router = canonical_dict(
        parse_topology(
            {
                "kind": "router",
                "routes": [
                    {
                        "name": "when_input_is_long",
                        "step": _agent("long_pro"),
                        "condition_name": "input_is_long",
                    }
                ],
                "fallback_step": _agent("short_pro"),
            }
        )
    )
    # every ticket right, at $0.02 on the 10 long ones and $0.01 on the 10 short ones
    assert [(acc, cost) for acc, cost, spec in front if spec == router] == [
        (1.0, pytest.approx(0.015))
    ]
    assert min(cost for acc, cost, _ in front if acc == 1.0) == pytest.approx(0.015)
    # all_round alone: 15 of 20 at $0.10; both specialists alone: 10 of 20
    proposed = {r.operator for r in result.history if r.operator.startswith("opening:")}
    assert "opening:router" in proposed
    assert "opening:self_consistency" not in proposed  # replayed agents: no repeat differs
