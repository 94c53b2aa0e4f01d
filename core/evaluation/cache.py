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


class InMemoryEvaluationCache(EvaluationCache):
    """A dict-backed `EvaluationCache`, safe across threads; lives as long as the process."""

    def __init__(self) -> None:
        self._data: dict[CacheKey, ExampleResult] = {}
        self._lock = threading.Lock()

    def get(self, spec_hash: str, example_id: str, trial: int) -> ExampleResult | None:
        with self._lock:
            return self._data.get((spec_hash, example_id, trial))

    def put(self, result: ExampleResult) -> None:
        key = (result.spec_hash, result.example_id, result.trial)
        stored = result.model_copy(update={"cached": False}) if result.cached else result
        with self._lock:
            self._data[key] = stored

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def keys(self) -> list[CacheKey]:
        """The stored keys, sorted."""
        with self._lock:
            return sorted(self._data)
