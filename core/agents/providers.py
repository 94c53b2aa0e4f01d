"""Real providers over HTTP: one fault rule for every model call, and errors that say what to do.

Every path that calls a model (the meta agent's designer, `solve`'s planner, the runtime
designer, GEPA's reflection model, a problem's own agents in `AgentStep`) runs its pydantic-ai
call through `call_with_retries` with the same `ProviderPolicy`, so a fault is handled the same
way wherever it happens:

- **per attempt**: the provider SDK's own retries are off (`max_retries = 0`) and each attempt
  has a timeout (`timeout_s`), both as pydantic-ai `ModelSettings` (`policy.model_settings()`);
- **transient faults are waited out**: HTTP 429 and 5xx, a timeout, a refused or cut
  connection, a reply that is not JSON (pydantic-ai's `ModelRateLimitError`,
  `ModelUnavailableError`, `ModelServerError`, `ModelConnectionError` and a plain
  `ModelAPIError`). The call is made again after the provider's `Retry-After` (pydantic-ai reads
  `retry-after-ms` or `Retry-After` into `retry_after`), else after `backoff_s` doubling per
  retry up to `max_backoff_s`. The waits of one call add up to at most `max_wait_s`; a wait that
  would pass it is not started;
- **a persistent failure stops the run, resumably**: the bounded wait used up, or a refusal that
  waiting cannot fix (any other 4xx: a bad key, an unknown model, a bad request), raises
  `ProviderError` naming the provider, the model, the status and what to do. A search stops as
  `stopped` (the CLI says `interrupted` and prints the `--resume` command), never `failed`; the
  call cache answers the calls already made when it is resumed.

A retried call is the whole agent call again (for a one-request agent, the request): what the
failed attempts were charged stays counted in the call's usage (a failed HTTP request carries no
tokens).

The `openai:` prefix is pydantic-ai's Responses API model (`POST /responses`), which local
OpenAI-compatible servers (Ollama, vLLM, llama.cpp) mostly lack; `openai-chat:` is the chat
completions model they all speak. A 404 from the Responses API, or a reply in another shape (a
`TypeError` while pydantic-ai reads it), is reported as such, with the prefix to use instead;
so is a chat completions request answered with something that is no chat completion (e.g. a
Responses API body: pydantic-ai's "Invalid response from ... chat completions endpoint"). Both
are persistent (not retried): the same server answers the same way again.

The base URL is the OpenAI SDK's own setting, `OPENAI_BASE_URL` (pydantic-ai's `OpenAIProvider`
reads it); a problem's `[models] base_url` sets it for the process when the environment does
not (`apply_base_url`), so every model built from an `openai*:` name uses it.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Awaitable, Callable, Generator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field
from pydantic_ai.exceptions import (
    ModelAPIError,
    ModelAuthenticationError,
    ModelConnectionError,
    ModelHTTPError,
    ModelNotFoundError,
    ModelRateLimitError,
    ModelRequestTimeout,
    ModelServerError,
    ModelTimeoutError,
    ModelUnavailableError,
    UnexpectedModelBehavior,
)
from pydantic_ai.settings import ModelSettings

from core.errors import ProviderError

__all__ = [
    "BASE_URL_ENV",
    "ProviderPolicy",
    "apply_base_url",
    "base_url",
    "call_with_retries",
    "current_policy",
    "missing_setting",
    "provider_error",
    "provider_failure",
    "use_policy",
]

T = TypeVar("T")

BASE_URL_ENV = "OPENAI_BASE_URL"
"""The OpenAI SDK's base URL setting, read by pydantic-ai's `OpenAIProvider`."""

_DEFAULT_BASE_URL = "https://api.openai.com/v1"


class ProviderPolicy(BaseModel):
    """How a model call meets faults (from a problem's `[models]` table; defaults below)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    timeout_s: float = Field(default=60.0, gt=0)
    """One attempt's timeout, in seconds (pydantic-ai's `ModelSettings.timeout`)."""
    max_wait_s: float = Field(default=120.0, ge=0)
    """The most one call waits between its attempts, in seconds, all waits together."""
    backoff_s: float = Field(default=1.0, ge=0)
    """The first wait when the provider names none (no `Retry-After`), in seconds; doubles."""
    max_backoff_s: float = Field(default=30.0, ge=0)
    """The longest single wait without a `Retry-After`, in seconds."""

    def model_settings(self) -> ModelSettings:
        """`{"timeout": timeout_s, "max_retries": 0}`: the SDK's own retries are off, so every
        attempt is one of ours (counted, waited for by this rule)."""
        return ModelSettings(timeout=self.timeout_s, max_retries=0)

    def backoff(self, retry: int) -> float:
        """The wait before retry number `retry` (1-based) when the provider names none, s."""
        return min(self.backoff_s * 2.0 ** (retry - 1), self.max_backoff_s)


_DEFAULT_POLICY = ProviderPolicy()
_POLICY: ContextVar[ProviderPolicy | None] = ContextVar("provider_policy", default=None)


def current_policy() -> ProviderPolicy:
    """The policy in force (`use_policy`), else the defaults."""
    return _POLICY.get() or _DEFAULT_POLICY


@contextmanager
def use_policy(policy: ProviderPolicy) -> Generator[ProviderPolicy]:
    """Make `policy` the one every model call in this context (and the tasks it starts) uses."""
    token = _POLICY.set(policy)
    try:
        yield policy
    finally:
        _POLICY.reset(token)


def base_url() -> str:
    """The OpenAI-compatible base URL in force (`OPENAI_BASE_URL`, else OpenAI's own)."""
    return os.environ.get(BASE_URL_ENV, "").strip() or _DEFAULT_BASE_URL


def apply_base_url(url: str | None) -> None:
    """Set `OPENAI_BASE_URL` to a problem's `[models] base_url` unless the environment has one
    (the environment wins, as for every other provider setting)."""
    if url and not os.environ.get(BASE_URL_ENV, "").strip():
        os.environ[BASE_URL_ENV] = url


_ENV_SETTING = re.compile(r"Set the (`[A-Z][A-Z0-9_]*`(?: or `[A-Z][A-Z0-9_]*`)*) environment")
"""pydantic-ai's wording for a provider's missing setting, e.g. "Set the `OPENAI_API_KEY`
environment variable or pass it via ..." (`pydantic_ai.providers.missing_api_key_error`)."""


def missing_setting(exc: BaseException) -> str | None:
    """The environment variable(s) a provider said it misses (`"OPENAI_API_KEY"`, or
    `"A or B"`), from pydantic-ai's `UserError` when it builds the provider; else None."""
    found = _ENV_SETTING.search(" ".join(str(exc).split()))
    return None if found is None else found.group(1).replace("`", "")


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, ModelHTTPError):
        return exc.status_code == 429 or exc.status_code == 408 or exc.status_code >= 500
    if isinstance(
        exc,
        ModelRateLimitError
        | ModelUnavailableError
        | ModelServerError
        | ModelConnectionError
        | ModelRequestTimeout,
    ):
        return True
    # a plain ModelAPIError: a reply pydantic-ai could not read (not JSON, cut short)
    return type(exc) is ModelAPIError


def _request_path(exc: BaseException) -> str | None:
    """The URL path of the HTTP request behind `exc` (the provider SDK's error, its cause,
    carries the response and its request), if any."""
    cause: BaseException | None = exc
    while cause is not None:
        response: Any = getattr(cause, "response", None)
        request: Any = getattr(response, "request", None) or getattr(cause, "request", None)
        url: Any = getattr(request, "url", None)
        path: Any = getattr(url, "path", None)
        if isinstance(path, str):
            return path
        cause = cause.__cause__
    return None


def _is_wrong_api(model: str, exc: BaseException) -> bool:
    """A Responses API model (`openai:`) meeting a server without `/responses`: a 404 or 405
    to a request for `.../responses`, or a reply in another shape (pydantic-ai then fails
    reading it with a `TypeError`, `KeyError` or `AttributeError`)."""
    if isinstance(exc, ModelHTTPError):
        path = _request_path(exc)
        return exc.status_code in (404, 405) and path is not None and path.endswith("/responses")
    prefix = model.partition(":")[0]
    return prefix in ("openai", "openai-responses") and isinstance(
        exc, TypeError | KeyError | AttributeError
    )


_NOT_A_CHAT_COMPLETION = re.compile(r"^Invalid response from \S+ chat completions endpoint\b")
"""pydantic-ai's wording when a chat-completions reply fails `ChatCompletion` validation (no
`choices`, another `object`: e.g. a Responses API body) or is not JSON data
(`OpenAIChatModel._process_response`)."""


def _is_wrong_chat_shape(exc: BaseException) -> bool:
    """A chat completions model (`openai-chat:`) given a reply that is not a chat completion."""
    return isinstance(exc, UnexpectedModelBehavior) and bool(
        _NOT_A_CHAT_COMPLETION.match(exc.message)
    )


def provider_error(
    exc: BaseException, model: str, *, attempts: int = 1, waited_s: float = 0.0
) -> ProviderError:
    """The `ProviderError` for `exc` from a call to `model`: provider, model, status, advice.

    Args:
        exc: what the pydantic-ai call raised (a `ModelAPIError`, or a `TypeError` while reading
            a reply in another API's shape).
        model: the `provider:model` name.
        attempts: how many attempts were made.
        waited_s: the seconds waited between them.
    """
    provider = model.partition(":")[0] or "model"
    url = base_url()
    where = f"{model!r} at {url}"
    tried = "" if attempts <= 1 else f" after {attempts} attempts and {waited_s:.1f} s of waiting"
    status = exc.status_code if isinstance(exc, ModelHTTPError) else None
    if _is_wrong_api(model, exc):
        name = model.partition(":")[2]
        answer = f"HTTP {status}" if status is not None else "in another API's shape"
        return ProviderError(
            f"model {where}: the server has no OpenAI Responses API (/responses answered {answer}); "
            f"the openai: prefix needs it: use openai-chat:{name} (chat completions, what "
            "Ollama, vLLM and llama.cpp speak)",
            model=model,
            status=status,
        )
    if _is_wrong_chat_shape(exc):
        name = model.partition(":")[2]
        return ProviderError(
            f"model {where}: the reply to /chat/completions is not a chat completion (the "
            f"openai-chat: prefix needs one): check that {BASE_URL_ENV} is the server's "
            f"OpenAI-compatible /v1, or, for a server with only the Responses API, use "
            f"openai:{name}",
            model=model,
        )
    transient = _is_transient(exc)
    if isinstance(exc, ModelHTTPError) and exc.status_code == 429:
        what = f"rate limited (HTTP 429){tried}"
        advice = (
            f"wait, or lower [rate_limits.{provider}] or raise [models] max_wait_s, then resume"
        )
    elif isinstance(exc, ModelHTTPError) and status is not None and status >= 500:
        what = f"server error (HTTP {status}){tried}"
        advice = "check the server (or the provider's status page), then resume"
    elif isinstance(exc, ModelTimeoutError | ModelRequestTimeout):
        what = f"no reply within the {current_policy().timeout_s:g} s timeout{tried}"
        advice = "check the server, or raise [models] timeout_s, then resume"
    elif isinstance(exc, ModelConnectionError):
        what = f"connection failed ({_cause(exc)}){tried}"
        advice = f"start the server, or fix {BASE_URL_ENV}, then resume"
    elif isinstance(exc, ModelAuthenticationError):
        what = f"the key was refused (HTTP {status})"
        advice = "check the provider's API key (e.g. OPENAI_API_KEY)"
    elif isinstance(exc, ModelNotFoundError):
        what = f"not found (HTTP {status})"
        advice = f"check the model id and {BASE_URL_ENV}"
    elif isinstance(exc, ModelHTTPError):
        what = f"request refused (HTTP {status}): {exc.body}"
        advice = "check the model and its settings"
    elif type(exc) is ModelAPIError:
        what = f"an unreadable reply ({exc}){tried}"
        advice = "check the server, then resume"
    else:
        what = f"{type(exc).__name__}: {exc}"
        advice = "check the model and the server"
    return ProviderError(
        f"model {where}: {what}: {advice}",
        model=model,
        status=status,
        transient=transient,
    )


def provider_failure(exc: BaseException) -> ProviderError | None:
    """The `ProviderError` behind `exc` (itself, a cause, or one in an exception group, as a
    pipeline step or a parallel branch wraps it), else None."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        err = todo.pop()
        if id(err) in seen:
            continue
        seen.add(id(err))
        if isinstance(err, ProviderError):
            return err
        if isinstance(err, BaseExceptionGroup):
            todo.extend(cast("BaseExceptionGroup[BaseException]", err).exceptions)
        for linked in (err.__cause__, err.__context__):
            if linked is not None:
                todo.append(linked)
    return None


def _cause(exc: BaseException) -> str:
    cause = exc.__cause__
    while cause is not None and cause.__cause__ is not None:
        cause = cause.__cause__
    return str(cause or exc) or type(cause or exc).__name__


async def call_with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    model: str,
    policy: ProviderPolicy | None = None,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    on_retry: Callable[[float, BaseException], Any] | None = None,
) -> T:
    """`await call()`, made again after each transient fault within the policy's bounded wait.

    Args:
        call: makes the model call (a fresh pydantic-ai run) each time it is called.
        model: the `provider:model` name, for the error.
        policy: the rule; None: `current_policy()`.
        sleep: waits a number of seconds (tests pass a virtual clock's).
        on_retry: told `(wait_s, error)` before each wait.

    Returns:
        What the first successful call returned.

    Raises:
        ProviderError: a persistent failure (the wait used up, or a non-transient refusal), or
            an `openai:` model meeting a server without the Responses API, or an
            `openai-chat:` model given a reply that is no chat completion (neither retried);
            chained to the cause.
        Anything else `call` raises, unchanged (e.g. pydantic-ai's `UnexpectedModelBehavior`
            for an output it could not validate: the model answered, the answer is bad).
    """
    rule = policy if policy is not None else current_policy()
    waited = 0.0
    attempts = 0
    while True:
        attempts += 1
        try:
            return await call()
        except ModelAPIError as exc:
            if not _is_transient(exc) or _is_wrong_api(model, exc):
                raise provider_error(exc, model, attempts=attempts, waited_s=waited) from exc
            wait = exc.retry_after if exc.retry_after is not None else rule.backoff(attempts)
            if waited + wait > rule.max_wait_s:
                raise provider_error(exc, model, attempts=attempts, waited_s=waited) from exc
            if on_retry is not None:
                on_retry(wait, exc)
            await sleep(wait)
            waited += wait
        except (TypeError, KeyError, AttributeError) as exc:
            if _is_wrong_api(model, exc):
                raise provider_error(exc, model, attempts=attempts, waited_s=waited) from exc
            raise
        except UnexpectedModelBehavior as exc:
            if _is_wrong_chat_shape(exc):
                raise provider_error(exc, model, attempts=attempts, waited_s=waited) from exc
            raise
