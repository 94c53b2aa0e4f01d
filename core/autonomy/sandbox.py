"""Sandboxes for generated tools: the `Sandbox` protocol and `BubblewrapSandbox`.

Generated code runs only in a real sandbox (runtime contract, decision 7). Before anything
runs, `check_implementation` parses the body (it is never executed here) and refuses: an import
of a module outside `allowed_imports`; any dunder name or attribute (`__import__`,
`__class__`, `__builtins__`, ...); calls of the builtins that reach around those rules
(`eval`, `exec`, `compile`, `getattr`, `setattr`, `delattr`, `globals`, `locals`, `vars`,
`open`, `input`, `breakpoint`); private names (starting with `_`, other than `_` itself,
import aliases included); string constants containing `__`; `global` and `nonlocal`; frame,
traceback, code and generator internals (`FORBIDDEN_ATTRIBUTES`: `f_builtins`, `f_globals`,
`f_locals`, `f_back`, `func_globals`, `mro`, ..., and every attribute starting `gi_`, `cr_`,
`ag_`, `tb_` or `co_`); `str.format`, `format_map` and `vformat` altogether (their fields read
attributes; f-strings are code and checked as such); on a name bound by an import, any
attribute chain deeper than `module.name`, and `module.name` where that is a module this process
has loaded (`re.enum`, `os.path`; validation imports nothing).

A run-time guard in the generated program then holds without the static check: the body runs
with its own globals (none of the program's names) and its own builtins without `open`, `eval`,
`exec`, `compile`, `breakpoint` and `input`; `builtins.__import__` is replaced by one that lets
the body's own code import only `allowed_imports` (the modules they import internally are not
restricted; the body's `__import__` is that guard), and binds the body a copy of each module
without the modules it imported (`re.enum`, `json.decoder.re`, `os.path` are missing; its own
submodules stay). This is a second layer, not a Python jail on its own (the interpreter's
builtins module keeps `open`, which frame internals could reach if the static check let them);
the isolation boundary is `bwrap`.

`BubblewrapSandbox` then runs each call in a fresh `bwrap` (the Debian package `bubblewrap`):

- every namespace unshared (no network: only a loopback device exists; own pid, ipc, uts
  namespaces), `--die-with-parent`, `--new-session`, all capabilities dropped;
- everything read-only but a private empty `/tmp`: `/usr` (and its `/bin`, `/lib`, `/lib64`
  links) bound read-only, the sandbox's own root and its minimal `/dev` remounted read-only
  (`--remount-ro`) after the mounts, `/proc`; `/tmp`, the only writable place, is a tmpfs of
  `tmp_mb` MiB (`--size`), so writing more fails with "No space left on device";
- a scrubbed environment (`--clearenv`, then `PATH`, `LANG`, `PYTHONDONTWRITEBYTECODE` and
  `PYTHONNOUSERSITE` only);
- as root, the sandbox runs as `nobody` (uid/gid 65534), so the process-count limit applies
  (root is exempt from `RLIMIT_NPROC`): a fork bomb stops at `max_processes`;
- the program sets rlimits before the body runs: address space = its size at start +
  `memory_mb` MiB, CPU seconds = ceil(`timeout_s`), file size 1 MiB, 64 open files;
- a wall timeout of `timeout_s` + `startup_allowance_s` kills the whole sandbox: `bwrap` starts
  in its own session and its process group gets SIGKILL (`--die-with-parent` takes the sandbox
  down with it), then its pipes are closed; the call returns a timeout error at most a couple of
  seconds after that even if the sandbox keeps its pipes open;
- output is read as it arrives, never buffered beyond the caps: stdout up to
  `max_output_bytes` (one byte more kills the sandbox and the call fails with
  `"output: ..."`), and only the last 64 KiB of stderr are kept;
- JSON in (the call's `args` on stdin) and out (one marked line on stdout).

The generated body is written into the call's private directory as a small program (the body
inside `def _generated_tool(args):`, a fixed prologue and epilogue whose names are private,
which the body cannot name: every name starting with `_` is refused) that the sandboxed system
interpreter (`/usr/bin/python3`) runs; nothing in `core/` evaluates it. Where `bwrap` cannot
start, `BubblewrapSandbox.check_available` raises `SandboxError`: there is no unsandboxed
fallback. Dependencies are refused (no package installs in this tier).
"""

from __future__ import annotations

import ast
import asyncio
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import types
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from core.errors import SandboxError, SpecError
from core.ir.agent_spec import GeneratedToolSpec

__all__ = [
    "FORBIDDEN_ATTRIBUTES",
    "FORBIDDEN_ATTRIBUTE_PREFIXES",
    "FORBIDDEN_CALLS",
    "BubblewrapSandbox",
    "Sandbox",
    "SandboxResult",
    "check_implementation",
]

FORBIDDEN_CALLS: frozenset[str] = frozenset(
    {
        "eval",
        "exec",
        "compile",
        "getattr",
        "setattr",
        "delattr",
        "globals",
        "locals",
        "vars",
        "open",
        "input",
        "breakpoint",
        "help",
        "memoryview",
    }
)
"""Builtin names a generated body may not use at all."""

FORBIDDEN_ATTRIBUTES: frozenset[str] = frozenset(
    {
        "f_builtins",
        "f_globals",
        "f_locals",
        "f_back",
        "f_code",
        "f_trace",
        "func_globals",
        "func_code",
        "func_closure",
        "format",
        "format_map",
        "vformat",
        "mro",
    }
)
"""Attributes a generated body may not use: frame, traceback, code and generator internals,
and `str.format`/`format_map` (their fields can read attributes; f-strings are checked like
code)."""

FORBIDDEN_ATTRIBUTE_PREFIXES: tuple[str, ...] = ("gi_", "cr_", "ag_", "tb_", "co_")
"""Attribute prefixes a generated body may not use (generator, coroutine, async generator,
traceback and code object internals)."""

_MARK = "@@TOOL_RESULT@@"
_FUNC = "_generated_tool"


def _wrapped_source(implementation: str) -> str:
    return f"def {_FUNC}(args):\n" + textwrap.indent(implementation.rstrip() + "\n", "    ")


def check_implementation(spec: GeneratedToolSpec) -> None:
    """Refuse a generated body that breaks the static rules (module docstring).

    Raises:
        SpecError: one `("$.implementation", "line N: ...")` pair per violation.
    """
    if spec.dependencies:
        raise SpecError(
            f"generated tool {spec.name!r} declares dependencies {list(spec.dependencies)}: "
            "this sandbox installs no packages, so they are refused",
            [("$.dependencies", "no package allowlist in this sandbox")],
        )
    try:
        tree = ast.parse(_wrapped_source(spec.implementation))
    except SyntaxError as exc:
        line = (exc.lineno or 1) - 1
        raise SpecError(
            f"generated tool {spec.name!r}: syntax error at line {line}: {exc.msg}",
            [("$.implementation", f"line {line}: {exc.msg}")],
        ) from None
    problems: list[str] = []
    allowed = spec.allowed_imports
    modules = _module_names(tree)
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 1) - 1
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if alias.asname and alias.asname.startswith("_"):
                    problems.append(f"line {line}: private name {alias.asname!r} is not allowed")
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top not in allowed:
                    problems.append(f"line {line}: import of {alias.name!r} is not allowed")
        elif isinstance(node, ast.ImportFrom):
            top = (node.module or "").split(".")[0]
            if node.level or top not in allowed:
                problems.append(f"line {line}: import from {node.module!r} is not allowed")
        elif isinstance(node, ast.Attribute) and node.attr.startswith("__"):
            problems.append(f"line {line}: dunder attribute {node.attr!r} is not allowed")
        elif isinstance(node, ast.Attribute) and (
            node.attr in FORBIDDEN_ATTRIBUTES or node.attr.startswith(FORBIDDEN_ATTRIBUTE_PREFIXES)
        ):
            problems.append(f"line {line}: attribute {node.attr!r} is not allowed")
        elif isinstance(node, ast.Attribute) and (problem := _module_attribute(node, modules)):
            problems.append(f"line {line}: {problem}")
        elif isinstance(node, ast.Name):
            if node.id.startswith("__"):
                problems.append(f"line {line}: dunder name {node.id!r} is not allowed")
            elif node.id.startswith("_") and node.id != "_":
                problems.append(f"line {line}: private name {node.id!r} is not allowed")
            elif node.id in FORBIDDEN_CALLS:
                problems.append(f"line {line}: {node.id!r} is not allowed")
        elif isinstance(node, ast.Global | ast.Nonlocal):
            problems.append(f"line {line}: global/nonlocal is not allowed")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if "__" in node.value:
                problems.append(f"line {line}: a string containing '__' is not allowed")
    if problems:
        raise SpecError(
            f"generated tool {spec.name!r} refused: " + "; ".join(problems),
            [("$.implementation", p) for p in problems],
        )


def _module_names(tree: ast.AST) -> dict[str, str]:
    """The names the body binds to modules by `import` (name -> module), and by `from m import
    n` where `m.n` is known to be a module here."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    names[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                base = sys.modules.get(node.module)
                if full in sys.modules or isinstance(
                    getattr(base, alias.name, None), types.ModuleType
                ):
                    names[alias.asname or alias.name] = full
    return names


def _module_attribute(node: ast.Attribute, modules: Mapping[str, str]) -> str | None:
    """Why `node` (an attribute of an imported module) is refused, if it is."""
    inner = node.value
    if (
        isinstance(inner, ast.Attribute)
        and isinstance(inner.value, ast.Name)
        and inner.value.id in modules
    ):
        return (
            f"attribute chain {inner.value.id}.{inner.attr}.{node.attr} is not allowed "
            "(only module.name)"
        )
    if isinstance(inner, ast.Name) and inner.id in modules:
        # only what this process already imported is looked at: validation imports nothing
        module = sys.modules.get(modules[inner.id])
        if isinstance(getattr(module, node.attr, None), types.ModuleType):
            return f"{inner.id}.{node.attr} is a module: it is not allowed"
    return None


@dataclass(frozen=True, slots=True)
class SandboxResult:
    """One sandboxed call.

    Attributes:
        ok: the body returned a JSON-serializable value.
        value: that value (None when not ok).
        error: why not ok: `"timeout: ..."`, `"memory: ..."`, `"output: ..."` (too much
            stdout), `"ExceptionType: message"`, `"exit N: <stderr tail>"`; None when ok.
        duration_ms: wall time of the call, sandbox start included, in ms.
    """

    ok: bool
    value: Any = None
    error: str | None = None
    duration_ms: float = 0.0

    def to_tool_result(self) -> Any:
        """What the agent sees: the value, or `{"error": ..., "ok": False}`."""
        return self.value if self.ok else {"ok": False, "error": self.error}


@runtime_checkable
class Sandbox(Protocol):
    """Runs generated tools in isolation; `DynamicToolFactory` needs only this.

    `validate` must refuse (raising) a spec the sandbox will not run, without running it;
    `execute` must never raise for a failure of the body (timeouts, memory, exceptions, bad
    output are a `SandboxResult` with `ok=False`) and must never run anything outside the
    sandbox.
    """

    def check_available(self) -> None:
        """Raise `SandboxError` if the sandbox cannot start here."""
        ...

    def validate(self, spec: GeneratedToolSpec) -> None:
        """Raise `SpecError` if `spec` breaks the static rules."""
        ...

    async def execute(self, spec: GeneratedToolSpec, args: Mapping[str, Any]) -> SandboxResult:
        """Run `spec` on `args` in the sandbox."""
        ...


_PROLOGUE = """\
import json as _json
import resource as _resource
import sys as _sys


def _limits():
    page = _resource.getpagesize()
    with open("/proc/self/statm") as fh:
        size = int(fh.read().split()[0]) * page
    extra = {memory} * 1024 * 1024
    _resource.setrlimit(_resource.RLIMIT_AS, (size + extra, size + extra))
    _resource.setrlimit(_resource.RLIMIT_CPU, ({cpu}, {cpu} + 1))
    _resource.setrlimit(_resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
    _resource.setrlimit(_resource.RLIMIT_NOFILE, (64, 64))
    if {nproc} > 0:
        _resource.setrlimit(_resource.RLIMIT_NPROC, ({nproc}, {nproc}))


_args = _json.loads(_sys.stdin.read())
_limits()
"""

_EPILOGUE = """

def _guard(allowed):
    # run-time guard, independent of the static check: the body gets its own globals (no
    # program names) and builtins without open, eval, exec, compile, breakpoint and input;
    # builtins.__import__ lets the body itself import only `allowed` (the modules it imports
    # keep their own imports)
    import builtins
    import types

    real_import = builtins.__import__
    getframe = _sys._getframe

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
        if getframe(1).f_globals is body_globals:
            if level or name.partition(".")[0] not in allowed:
                raise ImportError("import of " + repr(name) + " is not allowed in this sandbox")
            module = real_import(name, globals, locals, fromlist, level)
            return _modules_hidden(module, types.ModuleType)
        return real_import(name, globals, locals, fromlist, level)

    builtins.__import__ = guarded_import
    body_builtins = dict(builtins.__dict__)
    for name in ("open", "eval", "exec", "compile", "breakpoint", "input"):
        del body_builtins[name]
    body_globals = {{"__builtins__": body_builtins, "__name__": "generated_tool"}}
    return types.FunctionType({func}.__code__, body_globals, "generated_tool")


def _modules_hidden(module, module_type):
    # what the body's `import m` binds: m without the modules m itself imported (re.enum,
    # json.decoder.re, ...); its own submodules stay
    prefix = module.__name__ + "."
    view = module_type(module.__name__)
    for key, value in module.__dict__.items():
        if isinstance(value, module_type) and not value.__name__.startswith(prefix):
            continue
        if isinstance(value, module_type):
            value = _modules_hidden(value, module_type)
        view.__dict__[key] = value
    return view


def _main(args, tool, dumps, write, flush):
    try:
        value = tool(args)
        text = dumps({{"ok": True, "value": value}})
    except MemoryError:
        text = dumps({{"ok": False, "error": "memory: the memory limit was reached"}})
    except RecursionError:
        text = dumps({{"ok": False, "error": "RecursionError: too deep"}})
    except Exception as exc:
        text = dumps({{"ok": False, "error": type(exc).__name__ + ": " + str(exc)[:500]}})
    write("\\n{mark}" + text + "\\n")
    flush()


_main(_args, _guard({allowed}), _json.dumps, _sys.stdout.write, _sys.stdout.flush)
"""


def _program(spec: GeneratedToolSpec, nproc: int) -> str:
    prologue = _PROLOGUE.format(
        memory=int(spec.memory_mb), cpu=max(1, math.ceil(spec.timeout_s)), nproc=int(nproc)
    )
    return (
        prologue
        + "\n\n"
        + _wrapped_source(spec.implementation)
        + _EPILOGUE.format(func=_FUNC, mark=_MARK, allowed=repr(sorted(spec.allowed_imports)))
    )


class BubblewrapSandbox:
    """Runs generated tools in `bwrap` (see the module docstring for what is isolated).

    Args:
        bwrap: the `bwrap` executable; default the one on `PATH`.
        python: the interpreter inside the sandbox (under `/usr`); default `/usr/bin/python3`.
        tmp_mb: size of the sandbox's private `/tmp`, in MiB.
        max_processes: the process-count limit when the sandbox runs as `nobody` (as root).
        startup_allowance_s: added to `timeout_s` for the wall timeout (sandbox start-up).
        max_output_bytes: the most stdout a call may write; more kills it (an `"output: ..."`
            error).
    """

    def __init__(
        self,
        *,
        bwrap: str | None = None,
        python: str = "/usr/bin/python3",
        tmp_mb: int = 16,
        max_processes: int = 64,
        startup_allowance_s: float = 2.0,
        max_output_bytes: int = 1 << 20,
    ) -> None:
        self.bwrap = bwrap or shutil.which("bwrap") or "bwrap"
        self.python = python
        self.tmp_mb = tmp_mb
        self.max_processes = max_processes
        self.startup_allowance_s = startup_allowance_s
        self.max_output_bytes = max_output_bytes
        self._available: bool | None = None
        self.calls = 0
        """How many calls were started."""

    def _as_nobody(self) -> bool:
        return os.geteuid() == 0

    def _argv(self, program: Path) -> list[str]:
        argv = [
            self.bwrap,
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
            "--clearenv",
            "--setenv",
            "PATH",
            "/usr/bin:/bin",
            "--setenv",
            "LANG",
            "C.UTF-8",
            "--setenv",
            "PYTHONDONTWRITEBYTECODE",
            "1",
            "--setenv",
            "PYTHONNOUSERSITE",
            "1",
            "--ro-bind",
            "/usr",
            "/usr",
        ]
        for link in ("bin", "lib", "lib64", "sbin"):
            target = Path("/") / link
            if target.is_symlink():
                argv += ["--symlink", os.readlink(target), f"/{link}"]
            elif target.is_dir():
                argv += ["--ro-bind", str(target), f"/{link}"]
        argv += [
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--size",
            str(self.tmp_mb * 1024 * 1024),
            "--tmpfs",
            "/tmp",
            "--dir",
            "/sandbox",
            "--ro-bind",
            str(program),
            "/sandbox/tool.py",
            # the root (a tmpfs bwrap makes) and /dev read-only: /tmp is the only writable place
            "--remount-ro",
            "/dev",
            "--remount-ro",
            "/",
            "--chdir",
            "/tmp",
        ]
        if self._as_nobody():
            argv += ["--unshare-user", "--disable-userns"]
        argv += [self.python, "-I", "-S", "/sandbox/tool.py"]
        return argv

    def check_available(self) -> None:
        """Start one trivial sandbox (once per instance) to prove `bwrap` works here.

        Raises:
            SandboxError: `bwrap` is missing or cannot start a sandbox (with its message and
                how to install it).
        """
        if self._available:
            return
        if shutil.which(self.bwrap) is None and not Path(self.bwrap).exists():
            raise SandboxError(
                "bubblewrap (bwrap) is not installed: generated tools run only in a sandbox; "
                "install it with `apt-get install bubblewrap`"
            )
        probe = GeneratedToolSpec(name="probe", implementation="return 1")
        result = asyncio.run(self.execute(probe, {})) if not _loop_running() else None
        if result is None:
            result = _run_in_thread(self, probe)
        if not (result.ok and result.value == 1):
            raise SandboxError(f"bubblewrap cannot start a sandbox here: {result.error}")
        self._available = True

    def validate(self, spec: GeneratedToolSpec) -> None:
        """The static checks (`check_implementation`).

        Raises:
            SpecError: the body breaks a rule, or the spec declares dependencies.
        """
        check_implementation(spec)

    async def execute(self, spec: GeneratedToolSpec, args: Mapping[str, Any]) -> SandboxResult:
        """Run `spec` on `args` in a fresh sandbox; failures are results, never raised."""
        start = time.perf_counter()
        self.calls += 1
        try:
            payload = json.dumps(dict(args)).encode()
        except (TypeError, ValueError) as exc:
            return SandboxResult(False, error=f"arguments are not JSON: {exc}")
        with tempfile.TemporaryDirectory(prefix="ts-sandbox-") as tmp:
            program = Path(tmp) / "tool.py"
            nproc = self.max_processes if self._as_nobody() else 0
            program.write_text(_program(spec, nproc), encoding="utf-8")
            os.chmod(tmp, 0o755)
            os.chmod(program, 0o644)
            options: dict[str, Any] = {}
            if self._as_nobody():
                options = {"user": 65534, "group": 65534, "extra_groups": []}
            collector = _Collector(self.max_output_bytes, _STDERR_TAIL_BYTES)
            loop = asyncio.get_running_loop()
            try:
                transport, _ = await loop.subprocess_exec(
                    lambda: collector,
                    *self._argv(program),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    start_new_session=True,
                    env={"PATH": "/usr/bin:/bin"},
                    cwd=tmp,
                    **options,
                )
            except OSError as exc:
                return SandboxResult(False, error=f"sandbox did not start: {exc}")
            try:
                stdin = transport.get_pipe_transport(0)
                if isinstance(stdin, asyncio.WriteTransport):
                    stdin.write(payload)
                    stdin.close()
                wall = spec.timeout_s + self.startup_allowance_s
                await asyncio.wait(
                    (collector.finished, collector.overflowed),
                    timeout=wall,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                timed_out = not (collector.finished.done() or collector.overflowed.done())
                if not collector.finished.done():
                    _kill(transport)
                    # the killed sandbox closes its pipes at once; its output past the cap
                    # is discarded meanwhile, so this wait buffers nothing
                    await asyncio.wait((collector.finished,), timeout=_DRAIN_S)
            finally:
                if not collector.finished.done():
                    _kill(transport)
                transport.close()
            ms = (time.perf_counter() - start) * 1000
            if collector.overflowed.done():
                return SandboxResult(
                    False,
                    error=f"output: the call wrote more than {self.max_output_bytes} bytes",
                    duration_ms=ms,
                )
            if timed_out:
                return SandboxResult(
                    False,
                    error=f"timeout: the call ran longer than {spec.timeout_s:g} s",
                    duration_ms=ms,
                )
            out, err = bytes(collector.out), bytes(collector.err)
            return _parse(out, err, transport.get_returncode(), spec, ms)


_STDERR_TAIL_BYTES = 64 * 1024
"""How much of the end of a call's stderr is kept (for the error message)."""

_DRAIN_S = 2.0
"""How long a killed sandbox may take to close its pipes before they are closed on it."""


class _Collector(asyncio.SubprocessProtocol):
    """Takes a call's output as it arrives, never more than the caps.

    stdout is kept up to `out_cap` bytes; one byte more sets `overflowed` (the call is then
    killed, and whatever else arrives is discarded). Of stderr only the last `err_cap` bytes are
    kept. `finished` is set when the process has exited and all its pipes are closed.
    """

    def __init__(self, out_cap: int, err_cap: int) -> None:
        loop = asyncio.get_running_loop()
        self.out_cap = out_cap
        self.err_cap = err_cap
        self.out = bytearray()
        self.err = bytearray()
        self.finished: asyncio.Future[None] = loop.create_future()
        self.overflowed: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes | bytearray) -> None:
        if fd == 1:
            if self.overflowed.done():
                return
            room = self.out_cap - len(self.out)
            if len(data) > room:
                self.out += data[:room]
                self.overflowed.set_result(None)
            else:
                self.out += data
        elif fd == 2:
            self.err += data
            if len(self.err) > self.err_cap:
                del self.err[: len(self.err) - self.err_cap]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.finished.done():
            self.finished.set_result(None)


def _kill(transport: asyncio.SubprocessTransport) -> None:
    """SIGKILL the sandbox's whole process group (bwrap runs in its own session)."""
    pid = transport.get_pid()
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            transport.kill()
        except ProcessLookupError:
            pass


def _parse(
    out: bytes, err: bytes, code: int | None, spec: GeneratedToolSpec, ms: float
) -> SandboxResult:
    text = out.decode("utf-8", "replace")
    index = text.rfind(_MARK)
    if index >= 0:
        line = text[index + len(_MARK) :].splitlines()[0] if text[index + len(_MARK) :] else ""
        try:
            data: Any = json.loads(line)
        except ValueError:
            return SandboxResult(False, error="the tool's result is not JSON", duration_ms=ms)
        if isinstance(data, dict) and data.get("ok") is True:  # pyright: ignore[reportUnknownMemberType]
            return SandboxResult(True, value=data.get("value"), duration_ms=ms)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        error = str(data.get("error")) if isinstance(data, dict) else "bad result"  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        return SandboxResult(False, error=error, duration_ms=ms)
    tail = err.decode("utf-8", "replace").strip().splitlines()[-3:]
    killed = {int(signal.SIGXCPU), int(signal.SIGKILL)}
    # bwrap reports a child killed by signal N as exit 128 + N; asyncio as -N
    if code is not None and (-code in killed or code - 128 in killed):
        reason = f"timeout: the CPU limit of {math.ceil(spec.timeout_s)} s was reached"
        return SandboxResult(False, error=reason, duration_ms=ms)
    if any("MemoryError" in t for t in tail):
        return SandboxResult(False, error="memory: the memory limit was reached", duration_ms=ms)
    return SandboxResult(False, error=f"exit {code}: {' | '.join(tail)}", duration_ms=ms)


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _run_in_thread(sandbox: BubblewrapSandbox, spec: GeneratedToolSpec) -> SandboxResult:
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, sandbox.execute(spec, {})).result()
