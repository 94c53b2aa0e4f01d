"""The deterministic train / validation / test split of a gold set.

Rule: each example's rank key is `sha256(salt + "\\0" + key(example))` in hex; the
`validation_size` examples with the smallest keys form `"validation"`; with a `train_size`, the
next `train_size` by key form `"train"`; the others are `"test"`; each split keeps the source
order. Train is carved from what would otherwise be test, so adding a train split never moves an
example in or out of validation (every figure measured on validation stays valid). The split depends only on the key text (e.g. the question) and the
salt, never on file order, so reordering or appending to the source keeps every existing
example's side stable unless it is pushed across the size boundary.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

from core.evaluation.metrics import GoldExample

__all__ = ["split_examples", "split_rank_key"]


def split_rank_key(text: str, salt: str = "") -> str:
    """The rank key of one example: `sha256(salt + "\\0" + text)` as hex."""
    return hashlib.sha256(f"{salt}\0{text}".encode()).hexdigest()


def split_examples(
    examples: Sequence[GoldExample],
    *,
    validation_size: int,
    salt: str = "",
    key: Callable[[GoldExample], str] | None = None,
    train_size: int | None = None,
) -> dict[str, list[GoldExample]]:
    """Split `examples` into `"validation"`, `"test"` and, with a `train_size`, `"train"` (see
    the module docstring).

    Args:
        examples: the gold set, in source order; every example has a unique `id`.
        validation_size: how many go to validation; must be below `len(examples)`.
        salt: mixed into the hash.
        key: the text to hash per example; None uses `example.id`.
        train_size: how many go to train (the ranks just after validation's); None: no train
            split (the result has no `"train"` key).

    Returns:
        `{"validation": [...], "test": [...]}` plus `"train"` when `train_size` is given, each in
        source order.

    Raises:
        ValueError: `validation_size` is not in `[1, len(examples) - 1]`, `train_size` is below 1
            or leaves no test example, or an example has no id (when `key` is None).
    """
    n = len(examples)
    if not 1 <= validation_size < n:
        raise ValueError(
            f"validation_size must be between 1 and {n - 1} (there are {n} examples, and the "
            f"test split must not be empty); got {validation_size}"
        )
    if train_size is not None and not 1 <= train_size < n - validation_size:
        raise ValueError(
            f"train_size must be between 1 and {n - validation_size - 1} (there are {n} "
            f"examples, {validation_size} go to validation, and the test split must not be "
            f"empty); got {train_size}"
        )

    def text_of(ex: GoldExample) -> str:
        if key is not None:
            return key(ex)
        if not ex.id:
            raise ValueError("every gold example needs an id to be split by id")
        return ex.id

    ranked = sorted(range(n), key=lambda i: (split_rank_key(text_of(examples[i]), salt), i))
    chosen = set(ranked[:validation_size])
    train = set(ranked[validation_size : validation_size + (train_size or 0)])
    out = {
        "validation": [examples[i] for i in range(n) if i in chosen],
        "test": [examples[i] for i in range(n) if i not in chosen and i not in train],
    }
    if train_size is not None:
        out["train"] = [examples[i] for i in range(n) if i in train]
    return out
