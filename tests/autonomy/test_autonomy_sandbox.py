"""BubblewrapSandbox + DynamicToolFactory (runtime contract 7): the documented DOI tool runs; the
sandbox blocks network, writes outside its bounded temp directory (root and /dev included), an
endless loop, a memory bomb, a fork bomb, endless output and a disallowed import; the static
check refuses the review's frame, module-chain and str.format escapes, and the run-time guard
holds without it; a failing tool returns a structured error; dependencies and a missing bwrap
are refused."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from core.autonomy import BubblewrapSandbox, DynamicToolFactory, SandboxResult
from core.errors import SandboxError, SpecError
from core.ir import GeneratedToolSpec

SANDBOX = BubblewrapSandbox()

EXTRACT_DOIS = GeneratedToolSpec(
    name="extract_dois",
    description="Extract DOIs from a text blob.",
    parameters={"text": {"type": "string"}},
    implementation=(
        "import re\n"
        "matches = re.findall(r'10\\.\\d{4,}/[\\w.\\-/]+', args['text'])\n"
        "return {'dois': matches, 'count': len(matches)}\n"
    ),
    allowed_imports={"re"},
    dependencies=[],
    timeout_s=2.0,
    memory_mb=64,
)


def _run(spec: GeneratedToolSpec, args: dict[str, Any] | None = None) -> SandboxResult:
    SANDBOX.validate(spec)
    return asyncio.run(SANDBOX.execute(spec, args or {}))


def _spec(body: str, **kw: Any) -> GeneratedToolSpec:
    return GeneratedToolSpec(name="t", implementation=body, **kw)


def test_the_documented_tool_runs_as_a_pydantic_ai_tool() -> None:
    tool = asyncio.run(DynamicToolFactory(SANDBOX).spawn(EXTRACT_DOIS))
    assert tool.name == "extract_dois"
    assert tool.tool_def.parameters_json_schema == {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
        "additionalProperties": False,
    }
    text = "see 10.1000/xyz123 and 10.5555/abc.def"
    out = asyncio.run(tool.function(text=text))  # type: ignore[call-arg]
    assert out == {"dois": ["10.1000/xyz123", "10.5555/abc.def"], "count": 2}


def test_network_is_blocked() -> None:
    body = (
        "import socket\n"
        "s = socket.socket()\n"
        "s.settimeout(1)\n"
        "s.connect(('1.1.1.1', 80))\n"
        "return 'connected'\n"
    )
    result = _run(_spec(body, allowed_imports={"socket"}))
    assert not result.ok
    assert result.error is not None and result.error.startswith("OSError: [Errno 101]")


def test_writes_outside_the_private_tmp_are_blocked_and_tmp_is_private(tmp_path: Path) -> None:
    target = tmp_path / "escaped.txt"
    body = (
        "import pathlib\n"
        "pathlib.Path('/tmp/inside.txt').write_text('ok')\n"
        f"pathlib.Path({str(target)!r}).write_text('escaped')\n"
        "return 'wrote'\n"
    )
    result = _run(_spec(body, allowed_imports={"pathlib"}))
    assert not result.ok
    assert result.error is not None and result.error.startswith("FileNotFoundError")
    assert not target.exists()
    usr = _run(
        _spec(
            "import pathlib\npathlib.Path('/usr/x').write_text('x')\nreturn 1\n",
            allowed_imports={"pathlib"},
        )
    )
    assert usr.error is not None and usr.error.startswith("OSError: [Errno 30] Read-only")
    listing = _run(_spec("import os\nreturn sorted(os.listdir('/tmp'))\n", allowed_imports={"os"}))
    assert listing.ok and listing.value == []


def test_only_the_bounded_private_tmp_is_writable() -> None:
    # review B2: the root was a writable, unbounded tmpfs (host RAM) and /dev was writable
    body = (
        "import os\n"
        "out = {}\n"
        "for name in ('/x', '/dev/x', '/sandbox/x'):\n"
        "    try:\n"
        "        os.close(os.open(name, os.O_CREAT | os.O_WRONLY))\n"
        "        out[name] = 'written'\n"
        "    except OSError as exc:\n"
        "        out[name] = exc.strerror\n"
        "n = 0\n"
        "try:\n"
        "    while n < 100:\n"
        "        with os.fdopen(os.open('/tmp/f%d' % n, os.O_CREAT | os.O_WRONLY), 'wb') as fh:\n"
        "            fh.write(b'x' * (1 << 20))\n"
        "        n += 1\n"
        "except OSError as exc:\n"
        "    out['tmp'] = exc.strerror\n"
        "out['tmp_mib_written'] = n\n"
        "return out\n"
    )
    result = _run(_spec(body, allowed_imports={"os"}))
    assert result.ok, result.error
    written = result.value.pop("tmp_mib_written")
    assert result.value == {
        "/x": "Read-only file system",
        "/dev/x": "Read-only file system",
        "/sandbox/x": "Read-only file system",
        "tmp": "No space left on device",
    }
    assert 0 < written <= SANDBOX.tmp_mb


def test_an_endless_loop_is_stopped_by_the_time_limit() -> None:
    result = _run(_spec("while True:\n    pass\n", timeout_s=1.0))
    assert not result.ok
    assert result.error == "timeout: the CPU limit of 1 s was reached"
    assert result.duration_ms < 3_500


def test_an_endless_sleep_is_stopped_by_the_wall_timeout() -> None:
    result = _run(_spec("import time\ntime.sleep(60)\n", allowed_imports={"time"}, timeout_s=1.0))
    assert result.error == "timeout: the call ran longer than 1 s"


def _run_guarded(sandbox: BubblewrapSandbox, spec: GeneratedToolSpec) -> SandboxResult:
    """`execute`, with a guard that turns a hang into a failure (never reached when it works)."""
    sandbox.validate(spec)
    return asyncio.run(asyncio.wait_for(sandbox.execute(spec, {}), timeout=30))


def test_endless_stdout_is_cut_at_the_output_limit() -> None:
    # review B1: this hung execute forever (stdout was read to the end before the cap)
    spec = _spec("s = 'x' * 65536\nwhile True:\n    print(s)\n", timeout_s=1.0)
    result = _run_guarded(SANDBOX, spec)
    assert not result.ok
    assert result.error == "output: the call wrote more than 1048576 bytes"


def test_the_wall_timeout_holds_while_output_is_still_flowing() -> None:
    # review B1: children flood stderr (each until its CPU limit) while the parent waits, so
    # only the wall timeout can end the call; this hung, buffering all of stderr in memory
    body = (
        "import os, sys\n"
        "s = 'x' * 65536\n"
        "err = sys.stderr\n"
        "while True:\n"
        "    if os.fork() == 0:\n"
        "        while True:\n"
        "            err.write(s)\n"
        "    os.wait()\n"
    )
    spec = _spec(body, allowed_imports={"os", "sys"}, timeout_s=1.0)
    result = _run_guarded(SANDBOX, spec)
    assert not result.ok
    assert result.error == "timeout: the call ran longer than 1 s"


def test_a_memory_bomb_is_stopped_by_the_memory_limit() -> None:
    result = _run(_spec("x = bytearray(512 * 1024 * 1024)\nreturn len(x)\n", memory_mb=64))
    assert not result.ok
    assert result.error == "memory: the memory limit was reached"


def test_a_fork_bomb_is_stopped() -> None:
    body = (
        "import os\n"
        "n = 0\n"
        "try:\n"
        "    while True:\n"
        "        if os.fork() == 0:\n"
        "            import time\n"
        "            time.sleep(30)\n"
        "        n += 1\n"
        "except OSError as exc:\n"
        "    return {'forks': n, 'blocked': isinstance(exc, BlockingIOError)}\n"
    )
    result = _run(_spec(body, allowed_imports={"os", "time"}, timeout_s=5.0))
    assert result.ok, result.error
    assert result.value["blocked"] is True
    assert 0 < result.value["forks"] < SANDBOX.max_processes


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("import os\nreturn 1\n", "line 1: import of 'os' is not allowed"),
        (
            "from subprocess import run\nreturn 1\n",
            "line 1: import from 'subprocess' is not allowed",
        ),
        ("return ().__class__\n", "line 1: dunder attribute '__class__' is not allowed"),
        ("return __import__('os')\n", "line 1: dunder name '__import__' is not allowed"),
        ("return eval('1')\n", "line 1: 'eval' is not allowed"),
        ("return open('/etc/passwd').read()\n", "line 1: 'open' is not allowed"),
        ("return _sys\n", "line 1: private name '_sys' is not allowed"),
    ],
)
def test_disallowed_code_is_refused_before_it_runs(body: str, problem: str) -> None:
    with pytest.raises(SpecError) as exc:
        DynamicToolFactory(SANDBOX).build(_spec(body))
    assert exc.value.errors == [("$.implementation", problem)]


GI_FRAME_ESCAPE = (
    "b = (i for i in [1]).gi_frame.f_builtins\n"
    "os = b['_' + '_import_' + '_']('os')\n"
    "op = b['op' + 'en']\n"
    "return 1\n"
)
FORMAT_GLOBALS = "f = lambda: 0\nreturn ('{0.' + '_' * 2 + 'globals' + '_' * 2 + '}').format(f)\n"


@pytest.mark.parametrize(
    ("body", "imports", "problems"),
    [
        (
            GI_FRAME_ESCAPE,
            set[str](),
            [
                "line 1: attribute 'f_builtins' is not allowed",
                "line 1: attribute 'gi_frame' is not allowed",
            ],
        ),
        (
            "import re\nreturn re.enum.sys.modules['os']\n",
            {"re"},
            [
                "line 2: attribute chain re.enum.sys is not allowed (only module.name)",
                "line 2: re.enum is a module: it is not allowed",
            ],
        ),
        (
            "import re\nm = re.enum\nreturn 1\n",
            {"re"},
            ["line 2: re.enum is a module: it is not allowed"],
        ),
        (FORMAT_GLOBALS, set[str](), ["line 2: attribute 'format' is not allowed"]),
        (
            "return '{x}'.format_map(args)\n",
            set[str](),
            ["line 1: attribute 'format_map' is not allowed"],
        ),
        (
            "g = (lambda: 1)\nreturn g.func_globals\n",
            set[str](),
            ["line 2: attribute 'func_globals' is not allowed"],
        ),
        ("import re as _r\nreturn 1\n", {"re"}, ["line 1: private name '_r' is not allowed"]),
    ],
)
def test_the_review_bypasses_are_refused_statically(
    body: str, imports: set[str], problems: list[str]
) -> None:
    # review B3: each of these passed the static check
    with pytest.raises(SpecError) as exc:
        SANDBOX.validate(_spec(body, allowed_imports=imports))
    assert exc.value.errors == [("$.implementation", p) for p in problems]


def _execute_unchecked(body: str, imports: set[str] | None = None) -> SandboxResult:
    """Run a body without the static check, to show what the run-time guard alone does."""
    return asyncio.run(SANDBOX.execute(_spec(body, allowed_imports=imports or set()), {}))


def test_the_run_time_guard_holds_without_the_static_check() -> None:
    # review B3, second layer: the same escapes with the AST check skipped
    frame = "b = (i for i in [1]).gi_frame.f_builtins\n"
    imported = _execute_unchecked(frame + "return b['__import__']('os').listdir('/')\n")
    assert imported.error == "ImportError: import of 'os' is not allowed in this sandbox"
    statement = _execute_unchecked("import os\nreturn 1\n")
    assert statement.error == "ImportError: import of 'os' is not allowed in this sandbox"
    names = ("open", "eval", "exec", "compile", "breakpoint", "input", "getattr")
    seen = _execute_unchecked(frame + f"return [n for n in {names!r} if n in b]\n")
    assert seen.ok and seen.value == ["getattr"]
    plain = _execute_unchecked("return open('/sandbox/tool.py').read()\n")
    assert plain.error == "NameError: name 'open' is not defined"
    program = _execute_unchecked(
        frame + "return sorted(k for k in b['globals']() if k[0] == '_')\n"
    )
    assert program.ok and program.value == ["__builtins__", "__name__"]
    chain = _execute_unchecked("import re\nreturn str(re.enum.sys)\n", {"re"})
    assert chain.error == "AttributeError: module 're' has no attribute 'enum'"
    deeper = _execute_unchecked("import json\nreturn str(json.decoder.re)\n", {"json"})
    assert deeper.error == "AttributeError: module 'json.decoder' has no attribute 're'"


def test_allowed_modules_still_work_under_the_guard() -> None:
    body = (
        "import json\n"
        "import math\n"
        "import re\n"
        "from collections import Counter\n"
        "return [json.dumps({'a': [1, 2]}), math.sqrt(16.0), re.findall(r'a+', 'a aa b'),\n"
        "        json.loads('[1, 2]'), dict(Counter('abca'))]\n"
    )
    result = _run(_spec(body, allowed_imports={"json", "math", "re", "collections"}))
    assert result.ok, result.error
    assert result.value == ['{"a": [1, 2]}', 4.0, ["a", "aa"], [1, 2], {"a": 2, "b": 1, "c": 1}]


def test_a_failing_tool_returns_a_structured_error() -> None:
    tool = DynamicToolFactory(SANDBOX).build(_spec("return 1 / 0\n"))
    out = asyncio.run(tool.function())  # type: ignore[call-arg]
    assert out == {"ok": False, "error": "ZeroDivisionError: division by zero"}


def test_the_environment_is_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-leak")
    result = _run(_spec("import os\nreturn dict(os.environ)\n", allowed_imports={"os"}))
    assert result.ok
    assert "OPENAI_API_KEY" not in result.value
    assert sorted(result.value) == [
        "LANG",
        "PATH",
        "PWD",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONNOUSERSITE",
    ]


def test_dependencies_are_refused() -> None:
    with pytest.raises(SpecError, match="declares dependencies"):
        DynamicToolFactory(SANDBOX).build(_spec("return 1\n", dependencies=("pandas",)))


def test_no_sandbox_means_no_tool() -> None:
    factory = DynamicToolFactory(BubblewrapSandbox(bwrap="/nonexistent/bwrap"))
    with pytest.raises(SandboxError, match="apt-get install bubblewrap"):
        factory.build(EXTRACT_DOIS)


def test_the_tool_function_also_takes_the_args_dict_as_the_docs_call_it() -> None:
    tool = DynamicToolFactory(SANDBOX).build(EXTRACT_DOIS)
    out = asyncio.run(tool.function(args={"text": "10.1000/xyz123"}))  # type: ignore[call-arg]
    assert out == {"dois": ["10.1000/xyz123"], "count": 1}
