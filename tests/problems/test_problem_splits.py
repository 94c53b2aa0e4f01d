"""The deterministic validation / test split: by hash of a key text, never by file order."""

from __future__ import annotations

import hashlib

import pytest

from core.evaluation.metrics import GoldExample
from core.problems import split_examples, split_rank_key


def examples(n: int) -> list[GoldExample]:
    return [GoldExample(input=f"question {i}", expected=str(i), id=f"ex-{i:03d}") for i in range(n)]


def test_the_rank_key_is_sha256_of_salt_nul_text() -> None:
    assert split_rank_key("abc", "s") == hashlib.sha256(b"s\0abc").hexdigest()
    assert split_rank_key("abc") == hashlib.sha256(b"\0abc").hexdigest()


def test_sizes_and_source_order() -> None:
    exs = examples(50)
    s = split_examples(exs, validation_size=12, salt="x")
    assert len(s["validation"]) == 12
    assert len(s["test"]) == 38
    assert {e.id for e in s["validation"]} | {e.id for e in s["test"]} == {e.id for e in exs}
    assert not {e.id for e in s["validation"]} & {e.id for e in s["test"]}
    order = [e.id for e in exs]
    assert [e.id for e in s["validation"]] == sorted(
        (e.id for e in s["validation"]), key=order.index
    )


def test_the_validation_split_is_the_smallest_hashes() -> None:
    exs = examples(20)
    s = split_examples(exs, validation_size=5, salt="salt")
    expected = sorted(exs, key=lambda e: split_rank_key(e.id or "", "salt"))[:5]
    assert {e.id for e in s["validation"]} == {e.id for e in expected}


def test_file_order_plays_no_part() -> None:
    exs = examples(40)
    a = split_examples(exs, validation_size=10, salt="k")
    b = split_examples(list(reversed(exs)), validation_size=10, salt="k")
    assert {e.id for e in a["validation"]} == {e.id for e in b["validation"]}


def test_a_key_function_chooses_what_is_hashed() -> None:
    exs = examples(30)
    by_input = split_examples(exs, validation_size=10, key=lambda e: str(e.input))
    expected = sorted(exs, key=lambda e: split_rank_key(str(e.input)))[:10]
    assert {e.id for e in by_input["validation"]} == {e.id for e in expected}


def test_salt_changes_the_split_deterministically() -> None:
    exs = examples(40)
    a1 = split_examples(exs, validation_size=10, salt="a")
    a2 = split_examples(exs, validation_size=10, salt="a")
    b = split_examples(exs, validation_size=10, salt="b")
    assert [e.id for e in a1["validation"]] == [e.id for e in a2["validation"]]
    assert {e.id for e in a1["validation"]} != {e.id for e in b["validation"]}


@pytest.mark.parametrize("size", [0, 5, 6])
def test_sizes_that_leave_a_split_empty_are_refused(size: int) -> None:
    with pytest.raises(ValueError, match="validation_size must be between 1 and 4"):
        split_examples(examples(5), validation_size=size)


def test_examples_without_ids_cannot_be_split_by_id() -> None:
    exs = [GoldExample(input="a", id="a"), GoldExample(input="b")]
    with pytest.raises(ValueError, match="needs an id"):
        split_examples(exs, validation_size=1)


def test_train_is_carved_from_test_and_leaves_validation_unchanged() -> None:
    exs = examples(50)
    two = split_examples(exs, validation_size=12, salt="x")
    three = split_examples(exs, validation_size=12, salt="x", train_size=10)
    assert [e.id for e in three["validation"]] == [e.id for e in two["validation"]]
    ranked = sorted(exs, key=lambda e: split_rank_key(e.id or "", "x"))
    assert {e.id for e in three["train"]} == {e.id for e in ranked[12:22]}
    assert {e.id for e in three["test"]} == {e.id for e in ranked[22:]}
    assert (len(three["train"]), len(three["test"])) == (10, 28)
    order = [e.id for e in exs]
    assert [e.id for e in three["train"]] == sorted((e.id for e in three["train"]), key=order.index)


def test_no_train_size_gives_no_train_split() -> None:
    assert set(split_examples(examples(10), validation_size=3)) == {"validation", "test"}


@pytest.mark.parametrize("size", [0, 7, 8])
def test_a_train_size_that_leaves_no_test_is_refused(size: int) -> None:
    with pytest.raises(ValueError, match=rf"train_size must be between 1 and 6 .*got {size}"):
        split_examples(examples(10), validation_size=3, train_size=size)
