"""`PromptCallLog`: phase 2's record of GEPA's metric calls and reflections, for resume.

Why not gepa's own `run_dir` (gepa 0.1.4): its saved state (`GEPAState.save`) leaves out the
random generator that samples minibatches and candidates (`random.Random(seed)` built in
`gepa.api.optimize`), so a resumed run draws other minibatches than the uninterrupted one would;
and `GEPAEngine.run` scores the seed candidate on the whole validation set again before it loads
the saved state, repeating those metric calls on every resume.

Instead, every answer GEPA receives from us is appended to a JSON-lines file as it is made:
each `PromptAdapter.evaluate` (candidate texts, example ids, `capture_traces` -> outputs, scores,
trajectories, and what the evaluation cost: metric calls, model requests, USD) and each
reflection (prompt -> proposed text, its model requests and tokens). Resuming runs GEPA again
from the start with the same seed: it is deterministic given the same answers, so it asks the
same questions in the same order, and each one already in the log is answered from it (no model
is called, no metric call is made again) until the log runs out, after which the run continues
live, appending. The final result therefore equals the uninterrupted run's.

File format: one JSON object per line, `{"kind": "evaluate" | "reflect", "key": <sha256 of the
question>, ...answer}`; a last line cut short by a crash is ignored (and overwritten).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

from core.errors import OptimizationError

__all__ = ["PromptCallLog", "call_key", "recorded_or_made"]


def call_key(kind: str, question: Any) -> str:
    """The sha256 hex digest of `(kind, question)` as canonical JSON (sorted keys)."""
    text = json.dumps([kind, question], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class PromptCallLog:
    """Append-only record of phase 2's answers, replayed in order on resume.

    Args:
        path: the JSON-lines file; created (with its folder) when missing, read when present.

    Raises:
        OptimizationError: a complete line of the file is not a JSON object with `kind` and
            `key` (the line number and path are named).
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._pending: dict[str, deque[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self.recorded = 0
        """Answers read from the file when opened."""
        self.replayed = 0
        """Answers given from the file so far (each one a call not made again)."""
        keep = 0
        if self.path.is_file():
            data = self.path.read_bytes()
            for number, line in enumerate(data.splitlines(keepends=True), start=1):
                if not line.endswith(b"\n"):
                    break  # cut short by a crash: dropped, overwritten by the next append
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise OptimizationError(
                        f"phase 2 call log {self.path}, line {number}: not JSON ({exc.msg})"
                    ) from exc
                if not isinstance(record, dict) or "kind" not in record or "key" not in record:
                    raise OptimizationError(
                        f"phase 2 call log {self.path}, line {number}: not a call record "
                        "(needs 'kind' and 'key')"
                    )
                entry = cast("dict[str, Any]", record)
                self._pending.setdefault(str(entry["key"]), deque()).append(entry)
                self.recorded += 1
                keep += len(line)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "ab")  # noqa: SIM115  (closed by close())
        self._file.truncate(keep)

    def take(self, key: str) -> dict[str, Any] | None:
        """The oldest recorded answer under `key` not given yet (removed), else None."""
        with self._lock:
            queue = self._pending.get(key)
            if not queue:
                return None
            self.replayed += 1
            return queue.popleft()

    def append(self, kind: str, key: str, answer: dict[str, Any]) -> None:
        """Record one answer (flushed and fsynced before returning)."""
        line = json.dumps({"kind": kind, "key": key, **answer}, default=str) + "\n"
        with self._lock:
            self._file.write(line.encode())
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        """Close the file (idempotent)."""
        self._file.close()

    def __enter__(self) -> PromptCallLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


async def recorded_or_made(
    log: PromptCallLog | None,
    kind: str,
    key: str,
    make: Callable[[], Awaitable[dict[str, Any]]],
) -> dict[str, Any]:
    """The answer `log` holds under `key` (`PromptCallLog.take`), else `await make()`, appended
    to the log as `kind` before it is returned; with no log, `await make()`.

    Used by the runner's reflections and final re-scorings (the adapter's evaluations also count
    what was replayed, so they take and append themselves).
    """
    answer = None if log is None else log.take(key)
    if answer is None:
        answer = await make()
        if log is not None:
            log.append(kind, key, answer)
    return answer
