"""Running an agent once, statelessly, with its model usage always recorded.

The runtime's `AgentStep` (and agent classifiers and evaluators) run agents through
`run_agent`, so the evaluator can price every model call from the trace, including
structured-output retries and runs that fail.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Protocol, cast

from pydantic_ai.agent import AbstractAgent
from pydantic_ai.usage import RunUsage

from core.agents.base import BaseAgent
from core.agents.providers import current_policy

__all__ = [
    "UNKNOWN_MODEL",
    "UsageRecorder",
    "agent_model_name",
    "charge_started_request",
    "model_name",
    "request_was_quoted",
    "run_agent",
]

UNKNOWN_MODEL = "unknown"
"""The model name recorded when an agent has no model configured (it must get one per run)."""


def model_name(model: object) -> str:
    """The `provider:model` name of a pydantic-ai model, used to price its usage.

    Rule: a string (a pydantic-ai model id such as `"openai:gpt-4o-mini"`) is used as-is; a
    `Model` object gives `f"{model.system}:{model.model_name}"` (pydantic-ai's `model_id`),
    unless its `model_name` already starts with `f"{system}:"` (e.g. `FunctionModel(fn)` is
    `"function:fn:"`), in which case `model_name` alone is used; a model with only one of the two
    gives that one; None (no model configured) gives `"unknown"`.

    Args:
        model: a pydantic-ai `Model`, a model id string, or None.

    Returns:
        e.g. `"openai:gpt-4o-mini"`, `"test:test"`, `"function:fn:"`.
    """
    if model is None:
        return UNKNOWN_MODEL
    if isinstance(model, str):
        return model
    name = getattr(model, "model_name", None)
    system = getattr(model, "system", None)
    name = name if isinstance(name, str) and name else None
    system = system if isinstance(system, str) and system else None
    if name is None:
        return system or type(model).__name__
    if system is None or name.startswith(system + ":"):
        return name
    return f"{system}:{name}"


def agent_model_name(agent: object) -> str:
    """The name of the model `agent` runs with now, per `model_name`.

    A model set with pydantic-ai's `agent.override(model=...)` (active in this context) wins over
    the agent's configured `model`.
    """
    override: object = getattr(agent, "_override_model", None)
    if isinstance(override, ContextVar):
        some = cast("ContextVar[object]", override).get()  # pydantic-ai's `Some(value)` or None
        if some is not None and hasattr(some, "value"):
            return model_name(getattr(some, "value"))  # noqa: B009
    return model_name(getattr(agent, "model", None))


def _is_pydantic_agent(agent: object) -> bool:
    return isinstance(agent, AbstractAgent)


def _returns_output(agent: object) -> bool:
    return isinstance(agent, BaseAgent)


class UsageRecorder(Protocol):
    """Receives one agent run's usage; `core.runtime.tracing.record_usage` is one."""

    def __call__(
        self, model_name: str, /, *, requests: int, input_tokens: int, output_tokens: int
    ) -> None: ...


class _Ledger:
    """Usage a model charged itself at request start during one `run_agent` call, per model."""

    __slots__ = ("charged", "quoted", "record")

    def __init__(self, record: UsageRecorder | None) -> None:
        self.record = record
        self.charged: dict[str, list[int]] = {}
        self.quoted = False


_LEDGER: ContextVar[_Ledger | None] = ContextVar("agent_usage_ledger", default=None)


def charge_started_request(
    model_name: str, /, *, requests: int = 1, input_tokens: int = 0, output_tokens: int = 0
) -> None:
    """Charge a model request in full the moment it starts (a simulated model calls this).

    The rule it serves (docs/concepts.md, "Cost"): every request that started is charged in full, whether
    it finishes, fails or is cancelled (the losing branch of a `fastest` race), so a run's cost
    never depends on when a cancellation lands. The usage goes to the running `run_agent`'s
    recorder at once; `run_agent` then records only what pydantic-ai counted beyond it, so
    the request is not charged twice. Outside `run_agent` (or untraced) it records nothing.

    Args:
        model_name: the priced model name (the same one `agent_model_name` gives).
        requests, input_tokens, output_tokens: the request's full usage.
    """
    ledger = _LEDGER.get()
    if ledger is None or ledger.record is None:
        return
    if ledger.quoted:  # the caller charged this request's quote before the run started
        ledger.quoted = False
        return
    ledger.record(
        model_name, requests=requests, input_tokens=input_tokens, output_tokens=output_tokens
    )
    counts = ledger.charged.setdefault(model_name, [0, 0, 0])
    counts[0] += requests
    counts[1] += input_tokens
    counts[2] += output_tokens


def request_was_quoted() -> bool:
    """Whether the request now starting was already charged from the model's quote (see
    `run_agent(quoted=...)`): a simulated model then skips its own start-of-request charge
    (usage and model time). Read by `charge_started_request`, which is then a no-op once."""
    ledger = _LEDGER.get()
    return ledger is not None and ledger.quoted


async def run_agent(
    agent: Any,
    prompt: Any,
    *,
    record: UsageRecorder | None = None,
    quoted: tuple[str, int, int, int] | None = None,
    remote: bool = False,
) -> Any:
    """Run `agent` once on `prompt` with a fresh run state and return its output.

    No message history is passed, so each call is independent. A fresh `RunUsage` is handed to
    `agent.run(..., usage=...)`; pydantic-ai adds each model request into it in place, so after
    the run (also when it raises, e.g. after exhausting structured-output retries) it holds the
    usage of every attempt. That usage goes to `record` (the runtime passes
    `tracing.record_usage` when a trace is active) unless no request was made, less what a
    model already charged itself at request start (`charge_started_request`).

    Args:
        agent: a pydantic-ai agent, a `BaseAgent` (its `run` returns the output itself), or an
            `AgentLike`.
        prompt: the user prompt (usually from `render_prompt`).
        record: called once, after the run, also when the run raises, with
            `(model_name, requests=, input_tokens=, output_tokens=)`; the name follows
            `agent_model_name`.
        quoted: `(model_name, requests, input_tokens, output_tokens)` the caller already
            charged for the run's first request from the model's quote (`QuotingModel`); the
            model's own start-of-request charge of that request is skipped, and it is not
            recorded again after the run.
        remote: the call may go over the network: a pydantic-ai agent runs with the fault
            policy's model settings (`core.agents.providers.ProviderPolicy.model_settings`:
            the per-attempt timeout, the SDK's own retries off).

    Returns:
        The run's `output`.

    Raises:
        Whatever the agent run raises, unchanged.
    """
    usage = RunUsage()
    options: dict[str, Any] = {"usage": usage}
    if _is_pydantic_agent(agent):
        options["infer_name"] = False  # no call-frame inspection to guess the agent's name
        if remote:
            options["model_settings"] = current_policy().model_settings()
    ledger = _Ledger(record)
    if quoted is not None:
        ledger.quoted = True
        ledger.charged[quoted[0]] = [quoted[1], quoted[2], quoted[3]]
    token = _LEDGER.set(ledger)
    try:
        result = await agent.run(prompt, **options)
        if _returns_output(agent):
            return result  # a BaseAgent returns its output itself
    finally:
        _LEDGER.reset(token)
        if record is not None:
            name = agent_model_name(agent)
            pre = ledger.charged.get(name, [0, 0, 0])
            requests = max(0, usage.requests - pre[0])
            input_tokens = max(0, usage.input_tokens - pre[1])
            output_tokens = max(0, usage.output_tokens - pre[2])
            if requests or input_tokens or output_tokens:
                record(
                    name,
                    requests=requests,
                    input_tokens=input_tokens,
                    output_tokens=output_tokens,
                )
    return result.output
