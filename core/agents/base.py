"""`BaseAgent`, `GlobalState` and `DynamicAgent`: named agents over pydantic-ai, run on a state.

A `BaseAgent` is a live handle: a name, a system prompt, an output type, a model and a tool
list, and a lazily built `pydantic_ai.Agent` (`.agent`). `run(state, **kwargs)` renders the
prompt from the state (`build_prompt`) and returns the structured output.

It is an agent like any other for the runtime (`core.agents.is_agent`): `AgentStep`, routers'
classifiers and loops' evaluators accept it, and `core.agents.run_agent` records its usage, so
its calls are priced like every other model call. When the runtime runs it, the state is the
step's input (rendered with `str` unless it is a `GlobalState`).

Tools: `add_tool(tool)` replaces a tool of the same name (last write wins) and drops the built
agent; the next access to `.agent` rebuilds it. A run takes `.agent` once when it starts, so a
run in flight keeps the tools it started with.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic_ai import Agent, Tool
from pydantic_ai.models import Model
from pydantic_ai.usage import RunUsage

from core.agents.providers import current_policy
from core.ir.agent_spec import AgentSpec

__all__ = ["BaseAgent", "DynamicAgent", "GlobalState"]

OutputT = TypeVar("OutputT")


def _snake(name: str) -> str:
    out = "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")
    return out or "agent"


class GlobalState(BaseModel):
    """The mutable session state a run's agents share (a live handle, not a record).

    Agents read the goal and context from it; state updaters (e.g. `SubAgentTool`'s) write
    results into it. Tools receive it as their `RunContext.deps`.
    """

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    goal: str = ""
    """What the session is trying to achieve (the default prompt)."""
    context: dict[str, Any] = Field(default_factory=dict[str, Any])
    """Free-form inputs for the agents, by name."""
    results: dict[str, Any] = Field(default_factory=dict[str, Any])
    """Outputs written back by state updaters, by name."""
    history: list[str] = Field(default_factory=list[str])
    """A log of what happened, one line per event, oldest first."""


class BaseAgent(Generic[OutputT]):
    """A named agent on pydantic-ai, run on a state.

    Args:
        agent_name: the agent's name (traces, `SubAgentResult`, the roster); None = the
            class name in snake case (`"base_agent"`).
        system_prompt: the instructions.
        output_type: the structured output type (a Pydantic model, `str`, ...).
        model: a pydantic-ai `Model` or a `"provider:model"` string; None = given per run.
        tools: the initial tools (pydantic-ai `Tool`s), unique by name (last wins).
        retries: pydantic-ai's retries for tool calls and output validation.

    Raises:
        ValueError: `agent_name` is blank.
    """

    def __init__(
        self,
        agent_name: str | None = None,
        *,
        system_prompt: str = "",
        output_type: Any = str,
        model: Model | str | None = None,
        tools: Sequence[Tool[Any]] = (),
        retries: int = 1,
    ) -> None:
        if agent_name is None:
            agent_name = _snake(type(self).__name__)
        if not agent_name.strip():
            raise ValueError("agent_name must not be blank")
        self._agent_name = agent_name
        self.system_prompt = system_prompt
        self.output_type: Any = output_type
        self._model = model
        self._retries = retries
        self._tools: dict[str, Tool[Any]] = {}
        for tool in tools:
            self._tools[tool.name] = tool
        self._agent: Agent[Any, Any] | None = None

    @property
    def agent_name(self) -> str:
        """The agent's name."""
        return self._agent_name

    @property
    def model(self) -> Model | str | None:
        """The configured model (names the model in recorded usage)."""
        return self._model

    @property
    def tools(self) -> tuple[Tool[Any], ...]:
        """The current tools, in the order first added."""
        return tuple(self._tools.values())

    def add_tool(self, tool: Tool[Any]) -> None:
        """Add `tool`, replacing any tool of the same name; the agent is rebuilt on next use.

        Runs already in flight keep the tool list they started with.
        """
        self._tools[tool.name] = tool
        self._agent = None

    @property
    def agent(self) -> Agent[Any, Any]:
        """The underlying pydantic-ai agent, built on first access after a change."""
        if self._agent is None:
            self._agent = Agent(
                self._model,
                output_type=self.output_type,
                instructions=self.system_prompt or None,
                tools=list(self._tools.values()),
                retries=self._retries,
                name=self._agent_name,
                deps_type=object,
            )
        return self._agent

    def build_prompt(self, state: Any, **kwargs: Any) -> str:
        """The user prompt for one run: `prompt=` if given, else the state's goal (a
        `GlobalState`) or the state itself as text; other keyword arguments are appended as
        `name: value` lines."""
        prompt = kwargs.pop("prompt", None)
        if prompt is None:
            prompt = state.goal if isinstance(state, GlobalState) else str(state)
        lines = [str(prompt)]
        lines.extend(f"{key}: {value}" for key, value in kwargs.items())
        return "\n".join(lines)

    async def run(self, state: Any, /, *, usage: RunUsage | None = None, **kwargs: Any) -> OutputT:
        """Run once on `state` and return the structured output.

        Args:
            state: a `GlobalState` (passed to tools as `deps`), or any input (the runtime
                passes a step's input).
            usage: a pydantic-ai `RunUsage` that every model request adds into, in place
                (also when the run raises); `core.agents.run_agent` passes one to price it.
            **kwargs: `prompt=` and other values for `build_prompt`.

        Raises:
            Whatever the pydantic-ai run raises (e.g. `UnexpectedModelBehavior`).
        """
        agent = self.agent  # captured at start: a later add_tool does not change this run
        prompt = self.build_prompt(state, **kwargs)
        deps = state if isinstance(state, GlobalState) else None
        # a model named by a string may go over the network: the fault policy's per-attempt
        # timeout, the SDK's own retries off (core.agents.providers)
        settings = current_policy().model_settings() if isinstance(self._model, str) else None
        result = await agent.run(prompt, deps=deps, usage=usage, model_settings=settings)
        output: OutputT = result.output
        return output

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._agent_name!r})"


class DynamicAgent(BaseAgent[Any]):
    """A `BaseAgent` hydrated from an `AgentSpec` by `core.autonomy.AgentFactory`.

    Args:
        spec: the spec it was built from (kept as `.spec`).
        skipped_tools: tool names the factory skipped (`missing_tools="skip"`).
        **kwargs: as `BaseAgent`.
    """

    def __init__(
        self,
        agent_name: str,
        *,
        spec: AgentSpec,
        skipped_tools: Sequence[str] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(agent_name, **kwargs)
        self.spec = spec
        self.skipped_tools: tuple[str, ...] = tuple(skipped_tools)
