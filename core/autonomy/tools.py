"""`DynamicToolFactory`: a `GeneratedToolSpec` turned into a pydantic-ai `Tool` that runs
sandboxed.

`build(spec)` (and its async form `spawn(spec)`) first proves the sandbox can start here
(`Sandbox.check_available`: there is no unsandboxed fallback, runtime contract 7), then checks
the body statically (`Sandbox.validate`), and returns a `Tool` whose arguments are the spec's
`parameters` and whose every call runs in a fresh sandbox (its function also accepts the body's
`args` dict as one keyword argument, `tool.function(args={...})`, as the docs call it). A failing call (an exception in the
body, a timeout, the memory limit, bad output) returns `{"ok": False, "error": "..."}` to the
agent as the tool's result, never an exception in the agent loop.
"""

from __future__ import annotations

from typing import Any, cast

from pydantic_ai import Tool

from core.autonomy.sandbox import Sandbox
from core.ir.agent_spec import GeneratedToolSpec

__all__ = ["DynamicToolFactory"]


class DynamicToolFactory:
    """Builds sandboxed tools from `GeneratedToolSpec`s.

    Args:
        sandbox: where the tools run (e.g. `BubblewrapSandbox()`).
    """

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    def build(self, spec: GeneratedToolSpec) -> Tool[Any]:
        """The tool for `spec`.

        Raises:
            SandboxError: the sandbox cannot start here.
            SpecError: the body breaks the static rules, or declares dependencies.
        """
        self.sandbox.check_available()
        self.sandbox.validate(spec)
        sandbox = self.sandbox

        async def call(**kwargs: Any) -> Any:
            # the docs call the function with the body's `args` dict itself: `fn(args={...})`
            if set(kwargs) == {"args"} and "args" not in spec.parameters:
                inner = kwargs["args"]
                if isinstance(inner, dict):
                    kwargs = cast(dict[str, Any], inner)
            result = await sandbox.execute(spec, kwargs)
            return result.to_tool_result()

        call.__name__ = spec.name
        return Tool.from_schema(
            call,
            name=spec.name,
            description=spec.description or None,
            json_schema=spec.parameters_schema(),
        )

    async def spawn(self, spec: GeneratedToolSpec) -> Tool[Any]:
        """`build`, awaitable as the docs write it.

        Raises:
            SandboxError: as `build`.
            SpecError: as `build`.
        """
        return self.build(spec)
