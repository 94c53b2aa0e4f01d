"""Answers, normalisation and the ballot's current output (core.combinators.ballot)."""

from __future__ import annotations

from pydantic import BaseModel

from core.combinators import Answer, Ballot, BallotCandidate, ballot_output
from core.combinators.ballot import input_text, normalize_numeric, normalize_text, plain_value


class Label(BaseModel):
    label: str
    why: str = ""


def test_text_normalisation_strips_collapses_and_casefolds() -> None:
    assert normalize_text("  Billing\n Issue ") == "billing issue"
    assert normalize_text("STRASSE") == normalize_text("straße")  # casefold, not lower
    assert normalize_text("ｂｕｇ") == "bug"  # NFKC: full-width letters
    assert normalize_text("") == ""


def test_numeric_normalisation_reads_the_first_number() -> None:
    assert normalize_numeric("$1,200.0") == "1200"
    assert normalize_numeric("The answer is 12.50 dollars") == "12.5"
    assert normalize_numeric("-3") == "-3"
    assert normalize_numeric(".5") == "0.5"
    assert normalize_numeric("no number Here") == "no number here"


def test_answer_keys_of_text_structured_and_blank_outputs() -> None:
    text = Answer()
    assert text.key(" Refund ") == "refund"
    assert text.key("") == ""
    assert text.key("   ") == ""
    assert text.key(None) == ""
    field = Answer("label")
    assert field.key(Label(label="Bug ", why="x")) == "bug"
    assert field.key({"label": "LOGIN"}) == "login"
    assert field.key({"other": "x"}) == ""  # no such field: no answer
    assert field.key(None) == ""
    numeric = Answer(normalization="numeric")
    assert numeric.key("42.0") == numeric.key("$42") == "42"
    exact = Answer(normalization="exact")
    assert exact.key(" A ") == " A "
    own = Answer(answer_of=lambda out: out["x"][0], normalize=lambda s: s[::-1])
    assert own.key({"x": ["abc"]}) == "cba"


def test_a_ballot_stands_for_its_chosen_else_its_last_candidate() -> None:
    a = BallotCandidate(agent="a", output="one", answer="one")
    b = BallotCandidate(agent="b", output=Label(label="two"), answer="two")
    ballot = Ballot(input="q").with_candidate(a).with_candidate(b)
    assert ballot_output(ballot) == Label(label="two")
    assert ballot_output(ballot.choose(0)) == "one"
    assert ballot_output(Ballot(input="q")) is None
    assert ballot_output("plain") == "plain"
    # adding a candidate clears the choice, the verdict and the critique
    chosen = ballot.choose(0).model_copy(update={"verdict": True, "critique": "x"})
    after = chosen.with_candidate(a)
    assert (after.chosen, after.verdict, after.critique) == (None, None, None)
    assert len(after.candidates) == 3


def test_plain_values_and_input_text() -> None:
    a = BallotCandidate(agent="a", output="one", answer="one")
    ballot = Ballot(input="the question").with_candidate(a)
    assert plain_value(Ballot(input="the question")) == "the question"
    assert plain_value(ballot) == "one"
    assert plain_value([ballot, "raw", (ballot,)]) == ["one", "raw", ["one"]]
    assert input_text(ballot) == "the question"
    assert input_text(Label(label="x")) == '{"label":"x","why":""}'
    assert input_text(None) == ""
    assert input_text(3) == "3"
