"""One concurrency and rate budget per model provider, shared by every run that draws from it.

A budget is per provider (the pydantic-ai model's `system`: `"openai"`,
`"anthropic"`, `"function"` for a `FunctionModel`, ...; `"*"` is the limit of any provider
without its own): at most `max_concurrent` model calls in flight, `requests_per_minute`
requests and `tokens_per_minute` tokens (input + output), each a token bucket that refills
continuously and holds at most `burst_s` seconds' worth (default 60: a minute's allowance may
be spent at once, as providers count).

**Where it is drawn: only at the model call** (`core.runtime.step.AgentStep._run`, on a call
cache miss). A call takes its lease right before `run_agent` and gives it back right after,
charging the tokens the call recorded; nothing is held while a step waits for its children, so
nested `Parallel`s cannot deadlock however small the budget (no hold-and-wait: a leaf call that
waits holds nothing; the call that holds a slot waits for nothing but its model). The request
bucket is charged one request per call (a call's retries are pydantic-ai's own and are not
metered separately); the token bucket is charged after the call (its tokens are not known
before) and may go negative, so later calls wait until it has refilled.

- `TokenBuckets` is the arithmetic, on an explicit clock `now` (seconds): `try_acquire`
  answers 0.0 (granted) or how long to wait before asking again; `release` returns the slot.
- `RateBudget` is the async, in-process client the evaluator uses (`use_rate_budget`):
  `lease(provider)` waits with `asyncio.sleep` until `TokenBuckets` grants.
- `core.distributed` wraps one `TokenBuckets` in a single Ray actor and gives every worker a
  client with the same `acquire`/`release` interface (`RateBudgetLike`), so the budget holds
  across the cluster.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ANY_PROVIDER",
    "ProviderLimit",
    "RateBudget",
    "RateBudgetLike",
    "TokenBuckets",
    "active_rate_budget",
    "provider_of",
    "use_rate_budget",
]

ANY_PROVIDER = "*"
"""The provider key whose limit applies to every provider without its own."""

POLL_S = 0.005
"""How long a call waiting for a concurrency slot sleeps before asking again, seconds."""


class ProviderLimit(BaseModel):
    """The budget of one provider (None: that dimension is unlimited).

    The same names are the keys of a problem's `[rate_limits.<provider>]` table
    (`core.problems.config.ProblemConfig.rate_limits`) and the parts of `--rate-limit
    PROVIDER=RPM[:TPM[:CONCURRENT]]`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    requests_per_minute: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Model calls per minute."""
    tokens_per_minute: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Input + output tokens per minute."""
    max_concurrent: int | None = Field(default=None, ge=1)
    """Model calls in flight at once."""
    burst_s: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    """A bucket holds at most this many seconds' worth of its rate (at least one request)."""


@dataclass
class _Bucket:
    limit: ProviderLimit
    requests: float
    tokens: float
    updated: float
    in_flight: int = 0
    granted: int = 0
    grant_times: list[float] = field(default_factory=lambda: [])


class TokenBuckets:
    """Per-provider token buckets and concurrency counts (the arithmetic, no waiting).

    Args:
        limits: provider -> limit; `ANY_PROVIDER` applies to providers not named. A provider
            with no limit (none named, no `"*"`) is never held back.
        keep_grant_times: keep the clock time of every grant (`grant_times`), for tests.
    """

    def __init__(self, limits: Mapping[str, ProviderLimit], *, keep_grant_times: bool = False):
        self._limits = dict(limits)
        self._buckets: dict[str, _Bucket] = {}
        self._keep = keep_grant_times

    def _bucket(self, provider: str, now: float) -> _Bucket | None:
        bucket = self._buckets.get(provider)
        if bucket is None:
            limit = self._limits.get(provider, self._limits.get(ANY_PROVIDER))
            if limit is None:
                return None
            bucket = self._buckets[provider] = _Bucket(
                limit,
                _cap(limit.requests_per_minute, limit),
                _cap(limit.tokens_per_minute, limit),
                now,
            )
        limit = bucket.limit
        elapsed = max(0.0, now - bucket.updated)
        bucket.updated = max(now, bucket.updated)
        if limit.requests_per_minute is not None:
            rate = limit.requests_per_minute / 60.0
            bucket.requests = min(
                _cap(limit.requests_per_minute, limit), bucket.requests + rate * elapsed
            )
        if limit.tokens_per_minute is not None:
            rate = limit.tokens_per_minute / 60.0
            bucket.tokens = min(
                _cap(limit.tokens_per_minute, limit), bucket.tokens + rate * elapsed
            )
        return bucket

    def try_acquire(self, provider: str, now: float) -> float:
        """Take one call's lease for `provider` at clock time `now` (seconds).

        Returns:
            0.0 when granted (the caller must `release` it), else the seconds to wait before
            asking again (> 0).
        """
        bucket = self._bucket(provider, now)
        if bucket is None:
            return 0.0
        limit = bucket.limit
        if limit.max_concurrent is not None and bucket.in_flight >= limit.max_concurrent:
            return POLL_S
        if limit.requests_per_minute is not None and bucket.requests < 1.0:
            return (1.0 - bucket.requests) / (limit.requests_per_minute / 60.0)
        if limit.tokens_per_minute is not None and bucket.tokens < 0.0:
            return -bucket.tokens / (limit.tokens_per_minute / 60.0)
        if limit.requests_per_minute is not None:
            bucket.requests -= 1.0
        bucket.in_flight += 1
        bucket.granted += 1
        if self._keep:
            bucket.grant_times.append(now)
        return 0.0

    def release(self, provider: str, tokens: int, now: float) -> None:
        """Give back a lease `try_acquire` granted, charging the call's `tokens` (input +
        output; may leave the token bucket negative: later calls wait for it to refill)."""
        bucket = self._bucket(provider, now)
        if bucket is None:
            return
        bucket.in_flight = max(0, bucket.in_flight - 1)
        if bucket.limit.tokens_per_minute is not None:
            bucket.tokens -= max(0, tokens)

    @property
    def limits(self) -> dict[str, ProviderLimit]:
        """Provider -> the limit it was given (a copy)."""
        return dict(self._limits)

    def granted(self) -> dict[str, int]:
        """Provider -> leases granted so far."""
        return {p: b.granted for p, b in sorted(self._buckets.items())}

    def in_flight(self) -> dict[str, int]:
        """Provider -> leases granted and not yet released."""
        return {p: b.in_flight for p, b in sorted(self._buckets.items())}

    def grant_times(self) -> dict[str, list[float]]:
        """Provider -> clock time of each grant (only with `keep_grant_times`)."""
        return {p: list(b.grant_times) for p, b in sorted(self._buckets.items())}


def _cap(per_minute: float | None, limit: ProviderLimit) -> float:
    """A bucket's capacity: `burst_s` seconds of its rate, at least 1 (0 when unlimited)."""
    if per_minute is None:
        return 0.0
    return max(1.0, per_minute / 60.0 * limit.burst_s)


class RateBudgetLike(Protocol):
    """What a model call draws from: `await acquire(provider)` before the call, then
    `await release(provider, tokens)` after it (also when it raised)."""

    async def acquire(self, provider: str) -> None: ...

    async def release(self, provider: str, tokens: int) -> None: ...


class RateBudget:
    """The in-process `RateBudgetLike`: one `TokenBuckets` behind `asyncio.sleep` waits.

    Args:
        limits: provider -> `ProviderLimit` (see `TokenBuckets`).
        clock: seconds, monotonic (default `time.monotonic`).
        sleep: how a call waits, `await sleep(seconds)` (default `asyncio.sleep`); a test passes
            one that moves its fake `clock` on instead.
        keep_grant_times: see `TokenBuckets`.
    """

    def __init__(
        self,
        limits: Mapping[str, ProviderLimit],
        *,
        clock: Callable[[], float] | None = None,
        sleep: Callable[[float], Awaitable[object]] | None = None,
        keep_grant_times: bool = False,
    ) -> None:
        self.buckets = TokenBuckets(limits, keep_grant_times=keep_grant_times)
        self._clock = clock or time.monotonic
        self._sleep = sleep or asyncio.sleep

    @property
    def limits(self) -> dict[str, ProviderLimit]:
        """Provider -> its limit (what a run records as its effective rate limits)."""
        return self.buckets.limits

    async def acquire(self, provider: str) -> None:
        """Wait until `provider`'s budget grants one call."""
        while True:
            wait = self.buckets.try_acquire(provider, self._clock())
            if wait <= 0.0:
                return
            await self._sleep(wait if math.isfinite(wait) else POLL_S)

    async def release(self, provider: str, tokens: int) -> None:
        """Return the call's lease, charging its `tokens`."""
        self.buckets.release(provider, tokens, self._clock())


_ACTIVE: ContextVar[RateBudgetLike | None] = ContextVar("rate_budget", default=None)


class use_rate_budget:  # noqa: N801 (a context manager used like a function)
    """Make `budget` the rate budget of model calls in this context (None: unlimited). Tasks
    created inside inherit it. Use: `with use_rate_budget(budget): ...`."""

    __slots__ = ("_budget", "_token")

    def __init__(self, budget: RateBudgetLike | None) -> None:
        self._budget = budget
        self._token: Token[RateBudgetLike | None] | None = None

    def __enter__(self) -> None:
        self._token = _ACTIVE.set(self._budget)

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _ACTIVE.reset(self._token)
            self._token = None


def active_rate_budget() -> RateBudgetLike | None:
    """The rate budget of this context, or None (unlimited)."""
    return _ACTIVE.get()


def provider_of(agent: Any) -> str:
    """The provider an agent's calls are metered under: its model's `system` (pydantic-ai's
    provider name, e.g. `"openai"`, `"function"`), else `"unknown"`."""
    system = getattr(getattr(agent, "model", None), "system", None)
    return system if isinstance(system, str) and system else "unknown"
