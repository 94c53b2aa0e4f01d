"""The autonomy layer: agents spawned from specs, a tool registry with MCP discovery, the meta
orchestrator with hooks and metacognition, sandboxed generated tools, and the event bus.

```python
from core.autonomy import AgentFactory, ToolRegistry
from core.ir import AgentSpec

factory = AgentFactory(ToolRegistry())
agent = factory.spawn(AgentSpec(name="a", output_schema={"type": "string"}), model=TestModel())
```
"""

from core.autonomy.events import BusEvent, EventBus, EventHandler, Subscription
from core.autonomy.factory import CONSTRAINTS_HEADER, AgentFactory, system_prompt_with_constraints
from core.autonomy.hooks import (
    Abort,
    Continue,
    Hook,
    HookContext,
    HookDecision,
    HookRunner,
    MetacognitionConfig,
    Redirect,
    Skip,
)
from core.autonomy.mcp import (
    AllowList,
    DenyAll,
    MCPDiscovery,
    MCPServerConfig,
    MCPServerManager,
    PermissionGate,
    load_catalogue,
)
from core.autonomy.meta import (
    ExecutionResult,
    HookRecord,
    MetaOrchestrator,
    SubTask,
    SubTaskResult,
    TaskDecomposition,
)
from core.autonomy.registry import ToolRegistry, search_score
from core.autonomy.sandbox import (
    FORBIDDEN_CALLS,
    BubblewrapSandbox,
    Sandbox,
    SandboxResult,
    check_implementation,
)
from core.autonomy.tools import DynamicToolFactory

__all__ = [
    "CONSTRAINTS_HEADER",
    "FORBIDDEN_CALLS",
    "Abort",
    "AgentFactory",
    "AllowList",
    "BubblewrapSandbox",
    "BusEvent",
    "Continue",
    "DenyAll",
    "DynamicToolFactory",
    "EventBus",
    "EventHandler",
    "ExecutionResult",
    "Hook",
    "HookContext",
    "HookDecision",
    "HookRecord",
    "HookRunner",
    "MCPDiscovery",
    "MCPServerConfig",
    "MCPServerManager",
    "MetaOrchestrator",
    "MetacognitionConfig",
    "PermissionGate",
    "Redirect",
    "Sandbox",
    "SandboxResult",
    "Skip",
    "SubTask",
    "SubTaskResult",
    "Subscription",
    "TaskDecomposition",
    "ToolRegistry",
    "check_implementation",
    "load_catalogue",
    "search_score",
    "system_prompt_with_constraints",
]
