"""MCP discovery: a configured catalogue of servers, a permission gate, and the connections.

Deny by default and local first (runtime contract, decision 6). Nothing is discovered from the
network: `MCPDiscovery` reads a catalogue the researcher configured, a TOML file like

```toml
[[server]]
name = "metrics"
command = ["python", "-m", "my_metrics_server"]   # a stdio server (or: url = "http://...")
capabilities = ["compute_*", "metrics.*"]          # fnmatch patterns of the tools it offers
```

and `find(tool_name)` returns the servers whose advertised capabilities match. Before any
server is started or contacted, a `PermissionGate` decides: `DenyAll` (the default) refuses
everything; `AllowList(patterns)` allows a tool when one regular expression fully matches
either `"<server>.<tool>"` or the tool name. `MCPServerManager` connects through pydantic-ai's
MCP client (`pydantic_ai.mcp.MCPToolset`, on the `mcp` SDK) and turns each server tool into a
pydantic-ai `Tool` whose calls go to that server. The audit events are published by
`ToolRegistry.get_or_discover`.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol, cast, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_ai import Tool

__all__ = [
    "AllowList",
    "DenyAll",
    "MCPDiscovery",
    "MCPServerConfig",
    "MCPServerManager",
    "PermissionGate",
    "load_catalogue",
]


class MCPServerConfig(BaseModel):
    """One catalogue entry: how to reach an MCP server and what it advertises."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    name: str = Field(min_length=1)
    """The server's name in the catalogue (used in events and in `AllowList` patterns)."""
    command: tuple[str, ...] | None = None
    """A stdio server's command line (program, then arguments)."""
    url: str | None = None
    """A streamable-HTTP server's URL."""
    capabilities: tuple[str, ...] = ()
    """`fnmatch` patterns of the tool names it offers."""
    env: dict[str, str] | None = None
    """Environment of a stdio server (None: the MCP SDK's default safe subset)."""
    cwd: str | None = None
    """Working directory of a stdio server."""

    @model_validator(mode="after")
    def _one_transport(self) -> MCPServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError(f"MCP server {self.name!r} needs exactly one of command and url")
        if self.command is not None and not self.command:
            raise ValueError(f"MCP server {self.name!r}: command is empty")
        return self

    def offers(self, tool_name: str) -> bool:
        """Whether one of the advertised capability patterns matches `tool_name`."""
        return any(fnmatch.fnmatchcase(tool_name, p) for p in self.capabilities)


def load_catalogue(path: str | Path) -> list[MCPServerConfig]:
    """Read a catalogue TOML file (`[[server]]` tables, see the module docstring).

    Raises:
        ValueError: the file is not valid TOML or an entry is invalid (names the file).
        OSError: the file cannot be read.
    """
    text = Path(path).read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"MCP catalogue {path}: {exc}") from None
    raw: Any = data.get("server", [])
    if not isinstance(raw, list):
        raise ValueError(f"MCP catalogue {path}: 'server' must be an array of tables")
    out: list[MCPServerConfig] = []
    entries = cast(list[Any], raw)
    for i, entry in enumerate(entries):
        try:
            out.append(MCPServerConfig.model_validate(entry))
        except ValueError as exc:
            raise ValueError(f"MCP catalogue {path}: server[{i}]: {exc}") from None
    return out


class MCPDiscovery:
    """Finds catalogue servers that advertise a tool name.

    Args:
        catalogue: the servers, or the path of a catalogue TOML file; None = no servers.
    """

    def __init__(self, catalogue: Iterable[MCPServerConfig] | str | Path | None = None) -> None:
        if isinstance(catalogue, str | Path):
            self.servers: list[MCPServerConfig] = load_catalogue(catalogue)
        else:
            self.servers = list(catalogue or [])

    def find(self, tool_name: str) -> list[MCPServerConfig]:
        """The servers offering `tool_name`, in catalogue order."""
        return [s for s in self.servers if s.offers(tool_name)]


@runtime_checkable
class PermissionGate(Protocol):
    """Decides whether a tool of a server may be connected to and registered."""

    def allows(self, server: str, tool: str) -> bool:
        """True to allow `tool` of `server`."""
        ...


class DenyAll:
    """The default gate: nothing is allowed."""

    def allows(self, server: str, tool: str) -> bool:
        """Always False."""
        return False


class AllowList:
    """Allows a tool when a pattern (a regular expression) fully matches `"<server>.<tool>"`
    or the tool name.

    Args:
        patterns: the regular expressions.

    Raises:
        re.error: a pattern is not a valid regular expression.
    """

    def __init__(self, patterns: Sequence[str]) -> None:
        self.patterns = [re.compile(p) for p in patterns]

    def allows(self, server: str, tool: str) -> bool:
        """Whether one pattern matches `server.tool` or `tool`."""
        qualified = f"{server}.{tool}"
        return any(p.fullmatch(qualified) or p.fullmatch(tool) for p in self.patterns)


class MCPServerManager:
    """Connects to catalogue servers through pydantic-ai's MCP client and wraps their tools.

    Each call of a wrapped tool opens the server's toolset for that call (a stdio server is
    started and stopped around it), so no connection outlives the task that opened it.

    Args:
        timeout_s: connection and read timeout, in seconds.
    """

    def __init__(self, *, timeout_s: float = 20.0) -> None:
        self.timeout_s = timeout_s
        self.connections = 0
        """How many times a server was connected to."""

    def _toolset(self, server: MCPServerConfig) -> Any:
        from fastmcp.client import Client
        from fastmcp.client.transports import StdioTransport
        from pydantic_ai.mcp import MCPToolset

        if server.command is not None:
            transport = StdioTransport(
                command=server.command[0],
                args=list(server.command[1:]),
                env=server.env,
                cwd=server.cwd,
                keep_alive=False,
            )
            client: Any = Client(transport, timeout=self.timeout_s, init_timeout=self.timeout_s)
        else:
            client = server.url
        return MCPToolset(client, id=server.name, tool_error_behavior="error")

    async def tools(self, server: MCPServerConfig) -> list[Tool[Any]]:
        """Connect to `server` once and return its tools as pydantic-ai `Tool`s.

        Raises:
            Exception: whatever connecting or listing raises (the caller records it).
        """
        toolset = self._toolset(server)
        self.connections += 1
        async with toolset:
            listed = await toolset.list_tools()
        return [self._wrap(server, t.name, t.description or "", t.input_schema) for t in listed]

    def _wrap(
        self, server: MCPServerConfig, name: str, description: str, schema: dict[str, Any]
    ) -> Tool[Any]:
        manager = self

        async def call(**kwargs: Any) -> Any:
            toolset = manager._toolset(server)
            manager.connections += 1
            async with toolset:
                return await toolset.direct_call_tool(name, kwargs)

        call.__name__ = name
        return Tool.from_schema(call, name=name, description=description, json_schema=schema)
