"""The evaluation cache: a candidate proposed again costs nothing.

Results are keyed by `(spec_hash, example_id, trial)`: the canonical spec hash
(`core.ir.spec_hash`, so specs that differ only in node ids or key order share entries), the gold
example's id, and the 0-based trial number. The value is an `ExampleResult`, a frozen, plain,
serialisable record (bundle with status and error, output summary, trace as dicts), so a cache can
be prefilled from a run journal to resume a crashed run without re-running what was recorded:

```python
cache = InMemoryEvaluationCache()
for result in results_from_journal:      # ExampleResult.model_validate(...) per line
    cache.put(result)
evaluator = TopologyEvaluator(..., cache=cache)
```

What is cached: every run that finished (status `ok`, `degenerate`, `invalid`, and `error` for
exceptions raised by the topology, which are its behaviour). Runs cut short by the evaluator's
own `example_timeout_s` are not cached, since a later evaluation with more time may differ.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from typing import Any, cast

from pydantic import BaseModel

from core.evaluation._records import ExampleResult

__all__ = ["CacheKey", "EvaluationCache", "InMemoryEvaluationCache"]

CacheKey = tuple[str, str, int]
"""`(spec_hash, example_id, trial)`."""


class EvaluationCache(ABC):
    """Where the evaluator keeps finished runs, keyed by `(spec_hash, example_id, trial)`.

    Contract for implementations:

    - `get` returns the stored `ExampleResult` for the key, or None; it never raises for a
      missing key.
    - `put(result)` stores `result` under `(result.spec_hash, result.example_id, result.trial)`,
      replacing any earlier value; the stored value must be returned equal by later `get`s
      (records are frozen, so storing the object itself is fine).
    - Both may be called from several asyncio tasks of one event loop, and from several threads.
    """

    @abstractmethod
    def get(self, spec_hash: str, example_id: str, trial: int) -> ExampleResult | None:
        """The stored result for this key, or None."""

    @abstractmethod
    def put(self, result: ExampleResult) -> None:
        """Store `result` under its own `(spec_hash, example_id, trial)`."""

    @abstractmethod
    def __len__(self) -> int:
        """Number of stored results."""


class _Packed:
    """A pydantic model's state as plain tuples: its field values (nested models packed too)
    and its `model_fields_set`, interned. About a quarter of the model's own size: a model
    instance carries a `__dict__` and a set of its field names of its own (an
    `ExampleResult` with its `MetricBundle` took 3.1 KB; 30,000 of them were a fifth of a
    default search's peak memory)."""

    __slots__ = ("cls", "fields_set", "values")

    def __init__(self, cls: type[BaseModel], values: tuple[Any, ...], fields_set: frozenset[str]):
        self.cls = cls
        self.values = values
        self.fields_set = fields_set


_SETS: dict[frozenset[str], frozenset[str]] = {}


def _pack(model: BaseModel) -> _Packed:
    values = tuple(_pack(v) if isinstance(v, BaseModel) else v for v in model.__dict__.values())
    fields_set = frozenset(model.model_fields_set)
    return _Packed(type(model), values, _SETS.setdefault(fields_set, fields_set))


_NAMES: dict[type[BaseModel], tuple[str, ...] | None] = {}
"""Per packed class: its field names when `_unpack` may set its state directly (see there),
else None (then `model_construct` builds it)."""

_set_attr = object.__setattr__


def _direct_names(cls: type[BaseModel]) -> tuple[str, ...] | None:
    if cls not in _NAMES:
        plain = (
            not cls.__private_attributes__
            and cls.__pydantic_post_init__ is None
            and not cls.__pydantic_root_model__
            and cls.model_config.get("extra") != "allow"
        )
        _NAMES[cls] = tuple(cls.model_fields) if plain else None
    return _NAMES[cls]


def _unpack(packed: _Packed) -> Any:
    """The model `packed` was made from, equal to it (`__dict__`, `model_fields_set`).

    For a model class with no private attributes, no `model_post_init`, not a root model and
    no extra fields (`ExampleResult`, `MetricBundle`), its state is set directly, as
    `model_construct` ends by doing, without `model_construct`'s per-call defaults and alias
    handling (the packed values hold every field): an `ExampleResult` in 2.9 instead of 9.9 us
    (26 instead of 50 us each when 30,000 are rebuilt, the collector walking them), measured
    2026-12-07; a warm default search rebuilds about 8,000."""
    cls = packed.cls
    names = _direct_names(cls)
    if names is None:
        data = {
            name: _unpack(v) if type(v) is _Packed else v
            for name, v in zip(cls.model_fields, packed.values, strict=True)
        }
        return cls.model_construct(_fields_set=set(packed.fields_set), **data)
    model = cls.__new__(cls)
    _set_attr(
        model,
        "__dict__",
        {
            name: _unpack(v) if type(v) is _Packed else v
            for name, v in zip(names, packed.values, strict=True)
        },
    )
    _set_attr(model, "__pydantic_fields_set__", set(packed.fields_set))
    _set_attr(model, "__pydantic_extra__", None)
    _set_attr(model, "__pydantic_private__", None)
    return model


class InMemoryEvaluationCache(EvaluationCache):
    """A dict-backed `EvaluationCache`, safe across threads; lives as long as the process.

    A result without a trace is kept packed (its field values as tuples, see `_Packed`: about
    0.7 of 3.1 KB) and rebuilt on `get`, equal to what was put; one with a trace is kept as
    it is.
    """

    def __init__(self) -> None:
        self._data: dict[CacheKey, ExampleResult | _Packed] = {}
        self._lock = threading.Lock()

    def get(self, spec_hash: str, example_id: str, trial: int) -> ExampleResult | None:
        with self._lock:
            stored = self._data.get((spec_hash, example_id, trial))
        if type(stored) is _Packed:
            return cast(ExampleResult, _unpack(stored))
        return cast("ExampleResult | None", stored)

    def put(self, result: ExampleResult) -> None:
        key = (result.spec_hash, result.example_id, result.trial)
        stored = result.model_copy(update={"cached": False}) if result.cached else result
        packed = stored if stored.trace else _pack(stored)
        with self._lock:
            self._data[key] = packed

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def keys(self) -> list[CacheKey]:
        """The stored keys, sorted."""
        with self._lock:
            return sorted(self._data)
