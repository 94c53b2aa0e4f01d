"""Each standard-library entry on text and structured outputs: exact results, ties, blanks."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from core.combinators import Answer, Ballot, BallotCandidate, Library, plurality_choice
from core.combinators.library import (
    COLLECT,
    KEEP,
    VOTE,
    CombinatorEntry,
    all_agree,
    answer_present,
    ballot_entries,
    input_feature_entries,
    majority_agrees,
    said_yes,
    standard_library,
)
from core.hydrate import AgentRegistry, CallableRegistry
from core.ir.dataflow import NameEffect


class Label(BaseModel):
    label: str


def ballot(*answers: str, outputs: Sequence[Any] | None = None) -> Ballot:
    outs = list(answers) if outputs is None else list(outputs)
    return Ballot(
        input="q",
        candidates=tuple(
            BallotCandidate(agent=f"a{i}", output=o, answer=a)
            for i, (a, o) in enumerate(zip(answers, outs, strict=True))
        ),
    )


def entry(name: str, answer: Answer | None = None) -> Any:
    return next(e for e in ballot_entries(answer or Answer()) if e.name == name).fn


def test_plurality_vote_picks_the_most_common_answer() -> None:
    vote = entry(VOTE)
    assert vote(ballot("b", "a", "a")).chosen == 1
    assert vote(ballot("b", "a", "a")).current().answer == "a"
    # structured outputs: the chosen candidate's raw output is what the ballot stands for
    outs = [Label(label="Bug"), Label(label="login"), Label(label="bug")]
    voted = vote(ballot("bug", "login", "bug", outputs=outs))
    assert voted.current().output == Label(label="Bug")


def test_plurality_ties_go_to_the_earliest_candidate_and_blanks_do_not_vote() -> None:
    assert plurality_choice(ballot("x", "y", "z").candidates) == 0
    assert plurality_choice(ballot("x", "y", "y", "x").candidates) == 0
    assert plurality_choice(ballot("", "", "y").candidates) == 2  # two blanks lose to one answer
    assert plurality_choice(ballot("", "").candidates) is None
    assert plurality_choice(()) is None
    # no answer at all: no choice, the ballot stands for its last candidate
    assert entry(VOTE)(ballot("", "")).chosen is None


def test_collect_candidates_keeps_branch_order_and_the_original_input() -> None:
    collect = entry(COLLECT, Answer("label"))
    one = ballot("a")
    two = Ballot(input="q").with_candidate(BallotCandidate(agent="z", output="b", answer="b"))
    merged = collect([one, two, {"label": " C "}])
    assert merged.input == "q"
    assert [(c.agent, c.answer) for c in merged.candidates] == [("a0", "a"), ("z", "b"), ("", "c")]
    with pytest.raises(ValueError, match="no branch returned a ballot"):
        collect(["raw", "values"])


def test_keep_answer_is_the_identity() -> None:
    b = ballot("a")
    assert entry(KEEP)(b) is b


def test_agreement_verdicts() -> None:
    assert all_agree(ballot("a", "a")) is True
    assert all_agree(ballot("a", "a", "a")) is True
    assert all_agree(ballot("a", "b")) is False
    assert all_agree(ballot("a")) is False  # one candidate agrees with nothing
    assert all_agree(ballot("", "")) is False  # blanks never agree
    assert all_agree("raw input") is False
    assert majority_agrees(ballot("a", "b", "a")) is True
    assert majority_agrees(ballot("a", "b", "c")) is False
    assert majority_agrees(ballot("a", "a", "b", "b")) is False  # 2 of 4 is not more than half
    assert majority_agrees(ballot("a", "a")) is False  # needs three
    assert majority_agrees(ballot("", "", "")) is False
    assert answer_present(ballot("a")) is True
    assert answer_present(ballot("a", "")) is False  # the current (last) one is blank
    assert answer_present(ballot("", "a").choose(0)) is False
    assert answer_present(Ballot(input="q")) is False


def test_every_entry_declares_its_effect() -> None:
    agents = AgentRegistry()
    agents.register("j", object, "a judge")
    lib = standard_library(Answer(), agents=agents, inputs=["short", "a much longer input?"])
    effects = {e.name: (e.roles, e.effect) for e in lib}
    assert effects == {
        COLLECT: (("merge",), NameEffect(combine="all")),
        VOTE: (("step",), NameEffect(needs_candidates=2)),
        KEEP: (("step",), NameEffect(identity=True)),
        "all_agree": (("condition",), NameEffect(needs_candidates=2, verdict="accept")),
        "majority_agrees": (("condition",), NameEffect(needs_candidates=3, verdict="accept")),
        "answer_present": (("condition",), NameEffect(needs_candidates=1, verdict="accept")),
        "judge_by_j": (
            ("condition",),
            NameEffect(needs_candidates=1, verdict="accept", calls_agent="j"),
        ),
        "critique_by_j": (("evaluator",), NameEffect(needs_candidates=1, calls_agent="j")),
        "revise_with_critique": (("state_updater",), NameEffect()),
        "input_is_long": (("condition",), NameEffect()),
        "input_has_question_mark": (("condition",), NameEffect()),
    }
    assert all(e.description and "\n" not in e.description for e in lib)


def test_input_features_detect_and_only_varying_ones_are_offered() -> None:
    inputs = [
        "Plain words",
        "Order 66 went missing?",
        "```python\nprint(1)\n```",
        "Заказ не пришёл",
        "    code\nx",
    ]
    feats = {e.name: e.fn for e in input_feature_entries(inputs)}
    assert sorted(feats) == [
        "input_has_code",
        "input_has_digits",
        "input_has_question_mark",
        "input_is_long",
        "input_non_latin",
    ]
    table = {name: [fn(x) for x in inputs] for name, fn in feats.items()}
    # lengths 11, 22, 22, 15, 10: the median is 15, and "longer" is strictly longer
    assert table == {
        "input_is_long": [False, True, True, False, False],
        "input_has_digits": [False, True, True, False, False],
        "input_has_code": [False, False, True, False, True],
        "input_has_question_mark": [False, True, False, False, False],
        "input_non_latin": [False, False, False, True, False],
    }
    # a feature reads a ballot's original input, not its candidates
    b = Ballot(input="Order 66?").with_candidate(BallotCandidate(agent="a", output="x"))
    assert feats["input_has_digits"](b) is True
    # constant over the inputs: not offered
    assert [e.name for e in input_feature_entries(["a?", "b?"])] == []


def test_judge_replies_are_read_as_yes_or_no() -> None:
    assert said_yes("Yes.") is True
    assert said_yes("  **yes**, it is right") is True
    assert said_yes("no, the label is wrong") is False
    assert said_yes("") is False


def test_a_library_refuses_duplicate_names_and_a_problems_own_name_wins() -> None:
    lib = Library(ballot_entries(Answer()))
    with pytest.raises(ValueError, match="already has an entry 'keep_answer'"):
        lib.add(CombinatorEntry(KEEP, lambda s: s, "x", ("step",), NameEffect()))
    with pytest.raises(ValueError, match="roles must be some of"):
        CombinatorEntry("x", lambda s: s, "x", ("nope",), NameEffect())
    calls = CallableRegistry()
    mine = lambda s: s  # noqa: E731
    calls.register(KEEP, mine, "the problem's own keep")
    roles, effects = lib.register_into(calls, {"step": [KEEP]}, {})
    assert calls.get(KEEP) is mine
    assert roles["step"] == [KEEP, VOTE]  # own first; the library's keep is not added
    assert roles["merge"] == [COLLECT]
    assert KEEP not in effects


def test_async_entries_are_coroutines() -> None:
    agents = AgentRegistry()
    agents.register("j", object, "a judge")
    lib = standard_library(Answer(), agents=agents, inputs=[])
    judge = next(e.fn for e in lib if e.name == "judge_by_j")
    # no candidate yet: nothing to judge, no call made
    assert asyncio.run(judge(Ballot(input="q"))) is False


def test_extra_entries_join_the_library_after_the_standard_ones() -> None:
    agents = AgentRegistry()
    learned = CombinatorEntry(
        "learned_easy", lambda s: True, "A learned condition.", ("condition",), NameEffect()
    )
    lib = standard_library(Answer(), agents=agents, inputs=[], extra=[learned])
    assert lib.names()[-1] == "learned_easy"
    assert lib.names()[:3] == [COLLECT, VOTE, KEEP]
    own_state = standard_library(Answer(), agents=agents, inputs=[], ballots=False, extra=[learned])
    assert own_state.names() == ["learned_easy"]
    clash = CombinatorEntry(VOTE, lambda s: s, "x", ("step",), NameEffect())
    with pytest.raises(ValueError, match="already has an entry 'plurality_vote'"):
        standard_library(Answer(), agents=agents, inputs=[], extra=[clash])
