"""A learned condition reads only the question of a state, as it declares (`NameEffect()`): the
problem's reader (`ProblemParts.question_text`, kept as the callable registry's `input_text`),
at the fit as when routing, so a candidate a step put in the state never changes its routing.
gsm8k_replay's `MathState` holds the question and the candidates gathered so far."""

from __future__ import annotations

import re
import sys

from core.combinators.learned import question_reader, register_learned
from core.evaluation._run import example_key
from core.problems import load_problem
from core.search.learned import fit_between


def test_a_learned_condition_routes_a_question_the_same_with_a_candidate_in_the_state() -> None:
    problem = load_problem("gsm8k_replay", overrides={"models.time_scale": 0})
    registry = problem.callable_registry
    reader = question_reader(registry)
    train = problem.splits["train"]

    def n_numbers(question: str) -> int:
        return len(re.findall(r"\d+", question))

    # synthetic neighbours: the cheaper one is right on the questions with at most 3 numbers
    cheap = {example_key(e): float(n_numbers(e.input.question) <= 3) for e in train}
    dear = {example_key(e): 1.0 for e in train}
    conds = fit_between(cheap, dear, train, cheaper="c" * 64, dearer="d" * 64, text_of=reader)
    assert len(conds) == 3
    route = registry.get(register_learned(conds[1], registry))
    validation = problem.splits["validation"]
    state_module = sys.modules[type(validation[0].input).__module__]
    candidate = state_module.Candidate(
        run="6b_finetuning", solution="12 + 30 = 42 so 42 / 2 = 21\nA: 21", answer="21"
    )
    fresh = [route(e.input) for e in validation]
    later = [route(e.input.with_candidate(candidate)) for e in validation]
    assert reader(validation[0].input.with_candidate(candidate)) == validation[0].input.question
    assert later == fresh
    # it routes on the question: both ways on the validation questions, as fitted
    direct = [conds[1].routes_to_cheaper(conds[1].vector(e.input.question)) for e in validation]
    assert fresh == direct
    assert 0 < sum(fresh) < len(fresh)
