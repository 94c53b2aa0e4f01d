"""`AgentFactory`: an `AgentSpec` hydrated into a runnable `DynamicAgent`.

`spawn(spec, model=None)`:

1. checks `spec.output_schema` against the factory's `SchemaLimits` and builds its output type
   (`core.ir.schema_to_type`), or takes `output_type`;
2. resolves each tool: a `ToolSpec` by name in the `ToolRegistry`, a `GeneratedToolSpec`
   through the `tool_factory` (`DynamicToolFactory`, sandboxed);
3. appends the constraints to the system prompt in their own block,
   `"\\n\\nConstraints (you MUST follow these):\\n- <c1>\\n- <c2>"`;
4. picks the model: `model=` (tests pass a `TestModel` or `FunctionModel`), else
   `spec.model`, else `default_model`; with an `api_key`, a `"provider:model"` string is
   built with that key (it is handed to the provider and never logged or stored elsewhere);
5. returns a `DynamicAgent`.

Unknown tools are not silently dropped (runtime contract, decision 2). With
`missing_tools="error"` (the default) one `UnknownNamesError` lists every tool that resolves
neither in the registry nor (for `aspawn`) through discovery, with its path
(`$.tools[i]`), and the registered names. `missing_tools="skip"` keeps the docs' behaviour:
the agent spawns without them, each skipped name is recorded on `agent.skipped_tools`, and a
`factory.tool_skipped` event is published on the bus.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic_ai import Tool
from pydantic_ai.models import Model

from core.agents.base import DynamicAgent
from core.autonomy.registry import ToolRegistry
from core.errors import UnknownNamesError
from core.ir.agent_spec import AgentSpec, GeneratedToolSpec, SchemaLimits, check_schema

if TYPE_CHECKING:
    from core.autonomy.events import EventBus
    from core.autonomy.mcp import MCPDiscovery, MCPServerManager, PermissionGate
    from core.autonomy.tools import DynamicToolFactory

__all__ = ["CONSTRAINTS_HEADER", "AgentFactory", "system_prompt_with_constraints"]

CONSTRAINTS_HEADER = "Constraints (you MUST follow these):"
"""The line that opens the constraints block appended to a spawned agent's system prompt."""


def system_prompt_with_constraints(system_prompt: str, constraints: list[str]) -> str:
    """`system_prompt`, then a blank line, `CONSTRAINTS_HEADER` and one `- ` line per
    constraint; unchanged when there are none."""
    if not constraints:
        return system_prompt
    block = "\n".join([CONSTRAINTS_HEADER, *(f"- {c}" for c in constraints)])
    return f"{system_prompt}\n\n{block}" if system_prompt else block


class AgentFactory:
    """Hydrates `AgentSpec`s into `DynamicAgent`s against one tool registry.

    Args:
        registry: where `ToolSpec` names resolve; default an empty `ToolRegistry`.
        default_model: the model when neither `model=` nor `spec.model` is given.
        api_key: the provider key for string models; None = the provider's environment.
        tool_factory: builds `GeneratedToolSpec`s; None = they count as missing tools.
        missing_tools: `"error"` (default) or `"skip"` (see the module docstring).
        schema_limits: limits for output schemas; default `SchemaLimits()`.
        bus: receives `factory.spawned` and `factory.tool_skipped` events.
        discovery: MCP discovery used by `aspawn` for names the registry lacks (with
            `manager`, or neither).
        manager: the MCP server manager `aspawn`'s discovery connects through.
        permission: what discovery may connect and register; defaults to `DenyAll`.
    """

    def __init__(
        self,
        registry: ToolRegistry | None = None,
        default_model: Model | str = "openai:gpt-4.1",
        api_key: str | None = None,
        tool_factory: DynamicToolFactory | None = None,
        *,
        missing_tools: Literal["error", "skip"] = "error",
        schema_limits: SchemaLimits | None = None,
        bus: EventBus | None = None,
        discovery: MCPDiscovery | None = None,
        manager: MCPServerManager | None = None,
        permission: PermissionGate | None = None,
    ) -> None:
        if missing_tools not in ("error", "skip"):
            raise ValueError(f"missing_tools must be 'error' or 'skip', not {missing_tools!r}")
        self.registry = registry if registry is not None else ToolRegistry()
        self.default_model = default_model
        self._api_key = api_key
        self.tool_factory = tool_factory
        self.missing_tools: Literal["error", "skip"] = missing_tools
        self.schema_limits = schema_limits if schema_limits is not None else SchemaLimits()
        self.bus = bus
        self.discovery = discovery
        self.manager = manager
        self.permission = permission

    def __repr__(self) -> str:
        key = "set" if self._api_key else "None"
        return f"AgentFactory(default_model={self.default_model!r}, api_key={key})"

    def _model(self, spec: AgentSpec, override: Model | str | None) -> Model | str:
        chosen: Model | str = (
            override if override is not None else (spec.model or self.default_model)
        )
        if isinstance(chosen, str) and self._api_key is not None and ":" in chosen:
            from pydantic_ai.models import infer_model
            from pydantic_ai.providers import infer_provider_class

            key = self._api_key

            def provider(name: str) -> Any:
                return infer_provider_class(name)(api_key=key)  # pyright: ignore[reportCallIssue]

            return infer_model(chosen, provider_factory=provider)
        return chosen

    def _resolve(
        self, spec: AgentSpec, extra: dict[str, Tool[Any]]
    ) -> tuple[list[Tool[Any]], list[tuple[str, str, str]]]:
        tools: list[Tool[Any]] = []
        missing: list[tuple[str, str, str]] = []
        for i, item in enumerate(spec.tools):
            path = f"$.tools[{i}]"
            if isinstance(item, GeneratedToolSpec):
                if self.tool_factory is None:
                    missing.append((path, "generated_tool", item.name))
                    continue
                tools.append(self.tool_factory.build(item))
                continue
            tool = self.registry.get(item.name) or extra.get(item.name)
            if tool is None:
                missing.append((path, "tool", item.name))
            else:
                tools.append(tool)
        return tools, missing

    def _finish(
        self,
        spec: AgentSpec,
        tools: list[Tool[Any]],
        missing: list[tuple[str, str, str]],
        model: Model | str | None,
    ) -> DynamicAgent:
        if missing and self.missing_tools == "error":
            raise UnknownNamesError(missing, {"tool": self.registry.list_all()})
        if spec.output_schema is not None:
            check_schema(spec.output_schema, limits=self.schema_limits, path="$.output_schema")
        output = spec.output_spec()
        agent = DynamicAgent(
            spec.name,
            spec=spec,
            skipped_tools=[name for _, _, name in missing],
            system_prompt=system_prompt_with_constraints(spec.system_prompt, spec.constraints),
            output_type=output,
            model=self._model(spec, model),
            tools=tools,
        )
        if self.bus is not None:
            for path, kind, name in missing:
                self.bus.emit(
                    "factory.tool_skipped",
                    {"agent": spec.name, "tool": name, "kind": kind, "path": path},
                )
            self.bus.emit("factory.spawned", {"agent": spec.name, "tools": [t.name for t in tools]})
        return agent

    def spawn(self, spec: AgentSpec, model: Model | str | None = None) -> DynamicAgent:
        """Hydrate `spec` into a `DynamicAgent` (registry lookups only; see `aspawn`).

        Args:
            spec: the agent spec.
            model: a model to use instead of the spec's (e.g. `TestModel()` in tests).

        Raises:
            UnknownNamesError: with `missing_tools="error"`, every tool that does not resolve.
            SpecError: the output schema is over the factory's `schema_limits`.
            SandboxError: a generated tool cannot be sandboxed (from the tool factory).
        """
        tools, missing = self._resolve(spec, {})
        return self._finish(spec, tools, missing, model)

    async def aspawn(self, spec: AgentSpec, model: Model | str | None = None) -> DynamicAgent:
        """`spawn`, but a tool the registry lacks is first looked for through MCP discovery
        (`ToolRegistry.get_or_discover`, when the factory has `discovery` and `manager`).

        Raises:
            UnknownNamesError: as `spawn` (a discovered tool resolves like a registered one).
            SpecError: as `spawn`.
            SandboxError: as `spawn`.
        """
        if self.discovery is not None and self.manager is not None:
            for item in spec.tools:
                if not isinstance(item, GeneratedToolSpec) and item.name not in self.registry:
                    await self.registry.get_or_discover(
                        item.name,
                        discovery=self.discovery,
                        manager=self.manager,
                        permission=self.permission,
                        audit_bus=self.bus,
                    )
        return self.spawn(spec, model)
