"""`--executor local|ray [--ray-address ADDR]` and `--rate-limit` of `search`, `evaluate` and
`sweep`.

The rate limits a command runs under are the problem's `[rate_limits.<provider>]` tables with
each `--rate-limit PROVIDER=...` replacing its provider's table whole (a part left empty in the
flag is unlimited, whatever the TOML said; other providers keep their TOML limits):
`effective_rate_limits`. Units: requests per minute, tokens (input + output) per minute, calls
in flight.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from core.agents.rate_budget import ProviderLimit
from core.errors import EvaluationError
from core.evaluation.executor import Executor
from core.problems.problem import Problem
from studio.cli._common import CliUsageError

__all__ = [
    "add_executor_args",
    "effective_rate_limits",
    "executor_for",
    "make_executor",
    "parse_rate_limit",
    "rate_limits",
    "share_rate_limits",
]


def add_executor_args(p: Any) -> None:
    """Add `--executor` and `--ray-address` to parser (or group) `p`."""
    p.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="where evaluations run: 'local' (this process and its --workers, the default) or "
        "'ray' (Ray worker actors; needs pip install 'topology-studio[ray]')",
    )
    p.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="the Ray cluster for --executor ray ('auto', 'HOST:6379', 'ray://HOST:10001'); "
        "default: a private local Ray instance",
    )
    p.add_argument(
        "--ray-workers",
        type=_at_least_one,
        metavar="N",
        help="worker actors for --executor ray (default: the cluster's CPUs; a sweep gives each "
        "of its --parallel searches an equal part)",
    )
    # set by `sweep` on each of its searches (studio.cli.sweep), not meant to be typed
    p.add_argument("--rate-budget-actor", metavar="NAME", help=argparse.SUPPRESS)
    p.add_argument("--rate-share", type=_at_least_one, default=1, help=argparse.SUPPRESS)
    p.add_argument(
        "--rate-limit",
        action="append",
        default=[],
        type=parse_rate_limit,
        metavar="PROVIDER=RPM[:TPM[:CONCURRENT]]",
        help="one budget of model calls per provider across every worker, e.g. openai=500:200000:16 "
        "(requests and tokens per minute, calls in flight; empty parts are unlimited; '*' is every "
        "other provider); replaces that provider's [rate_limits.PROVIDER] table of the problem; "
        "repeatable",
    )


def make_executor(args: argparse.Namespace, problem: Problem) -> Executor | None:
    """The executor the command line asks for; None: local (the evaluator's default).

    Raises:
        CliUsageError: see `executor_for`.
    """
    return executor_for(
        getattr(args, "executor", "local") or "local",
        getattr(args, "ray_address", None),
        problem,
        effective_rate_limits(problem, args),
        workers=getattr(args, "ray_workers", None),
        budget_actor=getattr(args, "rate_budget_actor", None),
    )


def executor_for(
    kind: str,
    address: str | None,
    problem: Problem,
    limits: Mapping[str, ProviderLimit] | None = None,
    *,
    workers: int | None = None,
    budget_actor: str | None = None,
) -> Executor | None:
    """The executor `--executor KIND [--ray-address ADDRESS]` asks for (the studio's Start
    form passes its choice here too); None: local (the evaluator's default). Nothing is
    started: `Executor.start()` connects.

    Args:
        kind: `"local"` or `"ray"`.
        address: the Ray cluster (`core.distributed.address.check_ray_address`); None or
            "": a private local Ray (`init_ray`).
        problem: what the workers load (by its path).
        limits: the effective rate limits (`effective_rate_limits`), provider -> limit (None
            or empty: none).
        workers: `--ray-workers` (None: the cluster's CPUs).
        budget_actor: a sweep's shared budget actor's name (`--rate-budget-actor`).

    Raises:
        CliUsageError: an unknown kind, an address, workers or a budget actor without `ray`,
            a malformed address (the message names the forms), or Ray not installed.
    """
    address = (address or "").strip() or None
    shared = budget_actor
    if kind == "local":
        for given, flag in ((address, "--ray-address"), (workers, "--ray-workers")):
            if given:
                raise CliUsageError(f"{flag} needs --executor ray")
        if shared:
            raise CliUsageError("--rate-budget-actor needs --executor ray")
        return None
    if kind != "ray":
        raise CliUsageError(f"unknown executor {kind!r}: choose 'local' or 'ray'")
    from core.distributed.address import check_ray_address

    if address is not None:
        try:
            check_ray_address(address)
        except EvaluationError as exc:
            raise CliUsageError(f"--ray-address: {exc}") from None
    try:
        from core.distributed.ray_executor import RayExecutor
    except ImportError as exc:
        raise CliUsageError(str(exc)) from None
    return RayExecutor(
        problem,
        address=address,
        num_workers=workers,
        rate_limits=dict(limits or {}) or None,
        budget_actor=shared if limits else None,
    )


def parse_rate_limit(text: str) -> tuple[str, ProviderLimit]:
    """`"openai=500:200000:16"` -> ("openai", ProviderLimit(500, 200000, 16)); empty parts
    are unlimited (`"openai=:100000"`).

    Raises:
        argparse.ArgumentTypeError: not that form, or a value out of range.
    """
    provider, sep, rest = text.partition("=")
    parts = rest.split(":")
    if not sep or not provider.strip() or len(parts) > 3:
        raise argparse.ArgumentTypeError(f"expected PROVIDER=RPM[:TPM[:CONCURRENT]], not {text!r}")
    parts += [""] * (3 - len(parts))
    try:
        limit = ProviderLimit(
            requests_per_minute=float(parts[0]) if parts[0] else None,
            tokens_per_minute=float(parts[1]) if parts[1] else None,
            max_concurrent=int(parts[2]) if parts[2] else None,
        )
    except ValueError as exc:  # (pydantic's ValidationError is a ValueError)
        raise argparse.ArgumentTypeError(f"bad rate limit {text!r}: {exc}") from None
    return provider.strip(), limit


def rate_limits(args: argparse.Namespace) -> dict[str, ProviderLimit]:
    """`--rate-limit` values as provider -> limit (a later one for a provider wins)."""
    return dict(getattr(args, "rate_limit", None) or [])


def effective_rate_limits(problem: Problem, args: argparse.Namespace) -> dict[str, ProviderLimit]:
    """The limits a command runs under: `problem.rate_limits` (`[rate_limits.<provider>]`),
    each provider named by a `--rate-limit` replaced by the flag's limit, sorted by provider;
    then, for one of the N searches of a local sweep (`--rate-share N`), its part
    (`share_rate_limits`).

    Raises:
        CliUsageError: a `max_concurrent` smaller than the share.
    """
    merged = dict(sorted({**problem.rate_limits, **rate_limits(args)}.items()))
    return share_rate_limits(merged, getattr(args, "rate_share", 1) or 1)


def share_rate_limits(limits: dict[str, ProviderLimit], n: int) -> dict[str, ProviderLimit]:
    """One of `n` equal parts of `limits`, for `n` processes that must together stay within
    them: requests and tokens per minute divided by `n`, calls in flight divided by `n`
    rounded down, `burst_s` kept (so the parts' bursts add up to the whole's; a part's bucket
    still holds at least one request, see `core.agents.rate_budget`).

    Raises:
        CliUsageError: a provider's `max_concurrent` is below `n` (a part would get no call).
    """
    if n <= 1:
        return dict(limits)
    out: dict[str, ProviderLimit] = {}
    for provider, limit in limits.items():
        concurrent = limit.max_concurrent
        if concurrent is not None and concurrent < n:
            raise CliUsageError(
                f"the rate limit of {provider!r} allows {concurrent} call(s) in flight, fewer "
                f"than the {n} local searches that share it: lower --parallel to {concurrent}, "
                "or use --executor ray (one budget actor for every search)"
            )
        out[provider] = limit.model_copy(
            update={
                "requests_per_minute": _part(limit.requests_per_minute, n),
                "tokens_per_minute": _part(limit.tokens_per_minute, n),
                "max_concurrent": None if concurrent is None else concurrent // n,
            }
        )
    return out


def _part(value: float | None, n: int) -> float | None:
    return None if value is None else value / n


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, not {text!r}")
    return value
