"""`EventBus`: the runtime's audit events, published to handlers subscribed by topic pattern.

Topics are dotted names (`discovery.requested`, `factory.tool_skipped`,
`metacognition.redecomposition_triggered`, `orchestrator.subtask_finished`, ...). A pattern is
an `fnmatch` pattern over the topic: `"discovery.*"`, `"*"`, or an exact topic.

Handlers may be plain functions or coroutine functions, and receive the `BusEvent`. A handler
that raises never breaks the publisher (runtime contract, decision 8): the exception is logged
(logger `core.autonomy.events`, with its traceback) and counted in `handler_errors`, with the
topic and the error kept in `errors`. A coroutine handler scheduled by `emit` that is
cancelled before it finishes (e.g. its loop ends) is counted the same way, as a
`CancelledError`; `drain()` awaits every scheduled one (`MetaOrchestrator.solve` drains its bus
before it returns). Every published event is kept in `history` (the last
`history_size`), which is what the studio and the tests read.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

__all__ = ["BusEvent", "EventBus", "EventHandler", "Subscription"]

_log = logging.getLogger("core.autonomy.events")


@dataclass(frozen=True, slots=True)
class BusEvent:
    """One published event.

    Attributes:
        topic: the dotted topic, e.g. `"discovery.denied"`.
        payload: the event's data (JSON-like values).
        timestamp: wall-clock time of publication, in seconds since the epoch.
    """

    topic: str
    payload: Mapping[str, Any] = field(default_factory=dict[str, Any])
    timestamp: float = 0.0

    @property
    def event_type(self) -> str:
        """The topic, by the name the reference docs use."""
        return self.topic


EventHandler = Callable[[BusEvent], Awaitable[None] | None]
"""A handler: called with the event; may be a coroutine function."""


@dataclass(frozen=True, slots=True)
class Subscription:
    """A handle on one subscription; `bus.unsubscribe(sub)` ends it."""

    pattern: str
    handler: EventHandler
    ident: int


class EventBus:
    """Async publish/subscribe with topic patterns; handler errors are counted, never raised.

    Args:
        history_size: how many recent events `history` keeps.
    """

    def __init__(self, *, history_size: int = 10_000) -> None:
        self._subs: list[Subscription] = []
        self._next = 0
        self.history: deque[BusEvent] = deque(maxlen=history_size)
        """The most recent events, oldest first."""
        self.handler_errors = 0
        """How many handler calls raised."""
        self.errors: list[tuple[str, str]] = []
        """`(topic, "ExceptionType: message")` of each handler failure, oldest first."""
        self._pending: set[asyncio.Task[None]] = set()

    def subscribe(self, pattern: str, handler: EventHandler) -> Subscription:
        """Call `handler` for every event whose topic matches `pattern` (`fnmatch`)."""
        self._next += 1
        sub = Subscription(pattern, handler, self._next)
        self._subs.append(sub)
        return sub

    def subscribe_all(self, handler: EventHandler) -> Subscription:
        """Call `handler` for every event (the pattern `"*"`)."""
        return self.subscribe("*", handler)

    def unsubscribe(self, subscription: Subscription) -> None:
        """End a subscription (a no-op if it already ended)."""
        self._subs = [s for s in self._subs if s.ident != subscription.ident]

    def topics(self, pattern: str = "*") -> list[str]:
        """The topics in `history` matching `pattern`, in publication order."""
        return [e.topic for e in self.history if fnmatchcase(e.topic, pattern)]

    def _failed(self, topic: str, exc: BaseException) -> None:
        self.handler_errors += 1
        self.errors.append((topic, f"{type(exc).__name__}: {exc}"))
        _log.error("event handler for %r raised", topic, exc_info=exc)

    def _event(self, topic: str, payload: Mapping[str, Any] | None) -> BusEvent:
        event = BusEvent(topic, dict(payload or {}), time.time())
        self.history.append(event)
        return event

    async def publish(self, topic: str, payload: Mapping[str, Any] | None = None) -> int:
        """Publish an event and await every matching handler, in subscription order.

        Returns:
            How many handlers ran without raising.
        """
        event = self._event(topic, payload)
        ok = 0
        for sub in list(self._subs):
            if not fnmatchcase(topic, sub.pattern):
                continue
            try:
                result = sub.handler(event)
                if inspect.isawaitable(result):
                    await result
                ok += 1
            except Exception as exc:  # noqa: BLE001 (contract 8: counted, never raised)
                self._failed(topic, exc)
        return ok

    def emit(self, topic: str, payload: Mapping[str, Any] | None = None) -> None:
        """Publish from synchronous code: plain handlers run now; coroutine handlers run as
        tasks on the running loop (or to completion at once when no loop is running)."""
        event = self._event(topic, payload)
        for sub in list(self._subs):
            if not fnmatchcase(topic, sub.pattern):
                continue
            try:
                result = sub.handler(event)
                if inspect.isawaitable(result):
                    self._schedule(topic, result)
            except Exception as exc:  # noqa: BLE001 (contract 8)
                self._failed(topic, exc)

    def _schedule(self, topic: str, awaitable: Awaitable[None]) -> None:
        async def run() -> None:
            try:
                await awaitable
            except asyncio.CancelledError as exc:
                # e.g. the loop ended before the handler did: counted, then cancelled
                self._failed(
                    topic, asyncio.CancelledError("the handler was cancelled before it finished")
                )
                raise exc
            except Exception as exc:  # noqa: BLE001 (contract 8)
                self._failed(topic, exc)

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(run())
            return
        task = loop.create_task(run())
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def drain(self) -> None:
        """Wait for the coroutine handlers `emit` scheduled (a failed or cancelled one is
        already counted in `handler_errors`; `drain` itself does not raise for it)."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)
