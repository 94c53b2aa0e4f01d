"""`ToolRegistry`: the one namespace of tools agents may be given, with search and discovery.

Tools are pydantic-ai `Tool`s, by name. Registering a name again replaces it (last write
wins); discovery never does (it registers only the name asked for, and never over a
registered one). The registry is the audit trail: tools reach spawned agents only through it (or a
`DynamicToolFactory`), and discovery registers what it finds here.

`search(query, k)` is lexical keyword scoring, not semantic. Both the query and each tool's
name and description are split into lower-case word tokens (runs of letters and digits; `_`,
`-`, `.` and spaces separate). A tool scores

    3 x (query tokens in its name)
    + 1 x (query tokens in its description or its Python function's name)
    + 2 if the whole query, lower-cased with separators as `_`, is inside its name,

and the `k` best with a score above zero are returned, best first, ties by name.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from pydantic_ai import Tool

if TYPE_CHECKING:
    from core.autonomy.events import EventBus
    from core.autonomy.mcp import MCPDiscovery, MCPServerManager, PermissionGate

__all__ = ["ToolRegistry", "search_score"]

_TOKEN = re.compile(r"[a-z0-9]+")


def _tokens(text: str) -> set[str]:
    return set(_TOKEN.findall(text.lower()))


def search_score(query: str, name: str, description: str) -> int:
    """The `ToolRegistry.search` score of one tool (see the module docstring); `description`
    is the tool's description and its function's name."""
    q = _tokens(query)
    score = 3 * len(q & _tokens(name)) + len(q & _tokens(description))
    joined = "_".join(_TOKEN.findall(query.lower()))
    if joined and joined in "_".join(_TOKEN.findall(name.lower())):
        score += 2
    return score


class ToolRegistry:
    """Name -> pydantic-ai `Tool`, with keyword search and MCP discovery of missing names."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool[Any]] = {}
        self._descriptions: dict[str, str] = {}
        self._origins: dict[str, str] = {}

    def register(
        self,
        tool: Tool[Any] | Callable[..., Any],
        *,
        description: str | None = None,
        name: str | None = None,
        origin: str = "local",
    ) -> Tool[Any]:
        """Register a tool (a plain function is wrapped in a `Tool`); returns it.

        Args:
            tool: a pydantic-ai `Tool`, or a function (its name and docstring describe it).
            description: overrides the tool's description (what search and agents see).
            name: overrides the tool's name.
            origin: where the tool came from (`"local"`, `"mcp:<server>"`, `"generated"`).

        Raises:
            ValueError: the name is blank.
        """
        if not isinstance(tool, Tool):
            built: Tool[Any] = Tool(tool, name=name, description=description)
        elif name is None and description is None:
            built = cast(Tool[Any], tool)  # stored as given: get() returns this very object
        else:
            built = copy.copy(cast(Tool[Any], tool))
            if name is not None:
                built.name = name
            if description is not None:
                built.description = description
        tool = built
        if not tool.name.strip():
            raise ValueError("a tool name must not be blank")
        self._tools[tool.name] = tool
        self._descriptions[tool.name] = tool.description or ""
        self._origins[tool.name] = origin
        return tool

    def get(self, name: str) -> Tool[Any] | None:
        """The tool registered as `name`, or None."""
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def origin(self, name: str) -> str | None:
        """Where a registered tool came from, or None if not registered."""
        return self._origins.get(name)

    def description(self, name: str) -> str | None:
        """A registered tool's description, or None."""
        return self._descriptions.get(name)

    def _search_text(self, name: str) -> str:
        function = getattr(self._tools[name].function, "__name__", "")
        return f"{self._descriptions[name]} {function}"

    def search(self, query: str, k: int = 5) -> list[Tool[Any]]:
        """The `k` best tools for `query` by keyword score (module docstring), best first."""
        scored = [
            (search_score(query, name, self._search_text(name)), name) for name in self._tools
        ]
        ranked = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))
        return [self._tools[name] for _, name in ranked[: max(0, k)]]

    def list_all(self) -> list[str]:
        """Every registered name, in registration order."""
        return list(self._tools)

    def remove(self, name: str) -> None:
        """Unregister `name`.

        Raises:
            KeyError: no tool has that name.
        """
        if name not in self._tools:
            raise KeyError(f"no tool named {name!r} is registered")
        del self._tools[name]
        del self._descriptions[name]
        del self._origins[name]

    async def get_or_discover(
        self,
        name: str,
        *,
        discovery: MCPDiscovery,
        manager: MCPServerManager,
        permission: PermissionGate | None = None,
        audit_bus: EventBus | None = None,
        max_servers: int = 3,
    ) -> Tool[Any] | None:
        """The tool `name`: registered, or discovered on an MCP server of the catalogue.

        A miss asks `discovery` for servers whose advertised capabilities match `name` (at most
        `max_servers`), asks `permission` (default `DenyAll`) for each, connects to the
        allowed ones through `manager` and registers the requested tool `name` only (origin
        `"mcp:<server>"`), never the server's other tools, and never over a registered name:
        a permitted server tool whose name is already registered (a local tool it would
        shadow, or `name` registered meanwhile) is a `discovery.denied` event with `shadowed`
        and a `reason`, and the registered tool stays. Each step is an audit event on
        `audit_bus`: `discovery.requested`, then per server `discovery.denied`,
        `discovery.connected` or `discovery.failed` (also when no server advertises it).

        Returns:
            The tool, or None when no allowed server provides it.
        """
        found = self._tools.get(name)
        if found is not None:
            return found
        from core.autonomy.mcp import DenyAll

        gate = permission if permission is not None else DenyAll()

        def emit(topic: str, **payload: Any) -> None:
            if audit_bus is not None:
                audit_bus.emit(topic, {"tool": name, **payload})

        emit("discovery.requested")
        servers = discovery.find(name)[: max(0, max_servers)]
        if not servers:
            emit("discovery.failed", server=None, reason="no server in the catalogue offers it")
            return None
        for server in servers:
            if not gate.allows(server.name, name):
                emit("discovery.denied", server=server.name, gate=type(gate).__name__)
                continue
            try:
                tools = await manager.tools(server)
            except Exception as exc:  # noqa: BLE001 (a failed server is an event, not a crash)
                emit("discovery.failed", server=server.name, reason=f"{type(exc).__name__}: {exc}")
                continue
            registered: list[str] = []
            for tool in tools:
                if not gate.allows(server.name, tool.name):
                    continue
                if tool.name in self._tools:
                    # never replace a registered tool (a server could shadow a local one)
                    emit(
                        "discovery.denied",
                        server=server.name,
                        shadowed=tool.name,
                        reason=f"would shadow the registered tool {tool.name!r} "
                        f"(origin {self._origins[tool.name]})",
                    )
                elif tool.name == name:
                    self.register(tool, origin=f"mcp:{server.name}")
                    registered.append(tool.name)
            emit("discovery.connected", server=server.name, registered=registered)
            if name in self._tools:
                return self._tools[name]
            emit("discovery.failed", server=server.name, reason="the server has no such tool")
        return None
