"""The safety boundary (semantics section 7): no eval, exec, pickle.loads or dynamic import
anywhere in the product's code, so a spec can only ever reach registered names.

Scans the syntax trees of `core/`, `studio/`, `pages/` and `data/problems/`. The one allowed
dynamic import is the problem loader importing the problem author's own module by file path
(trusted code named in the problem's TOML, like a pytest conftest; never a name from a spec).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("core", "studio", "pages", "data/problems")

BANNED_CALLS = frozenset(
    {
        "eval",
        "exec",
        "compile",
        "__import__",
        "import_module",
        "spec_from_file_location",
        "exec_module",
        "run_path",
        "run_module",
        "loads",  # only when called on pickle / marshal / dill / cloudpickle (see below)
        "load",
    }
)
BUILTINS = frozenset({"eval", "exec", "compile", "__import__"})
UNSAFE_MODULES = frozenset({"pickle", "marshal", "dill", "cloudpickle", "shelve", "runpy"})

ALLOWED = {
    ("core/problems/loader.py", "importlib.util.spec_from_file_location"),
    ("core/problems/loader.py", "spec.loader.exec_module"),
}


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return "?"


def _findings(source: str, rel: str) -> list[tuple[str, str]]:
    tree = ast.parse(source, filename=rel)
    found: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(rel, f"import {a.name}") for a in node.names if a.name in UNSAFE_MODULES]
        elif isinstance(node, ast.ImportFrom) and (node.module or "") in UNSAFE_MODULES:
            found.append((rel, f"from {node.module} import"))
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            last = name.rsplit(".", 1)[-1]
            if last not in BANNED_CALLS:
                continue
            if last in BUILTINS and name not in (last, f"builtins.{last}"):
                continue  # re.compile, ... : not the builtin
            if last in ("loads", "load"):
                head = name.split(".", 1)[0]
                if head not in UNSAFE_MODULES:
                    continue  # json.loads, tomllib.load, ... are data, not code
            found.append((rel, name))
    return found


def test_no_eval_exec_pickle_or_dynamic_import() -> None:
    files = [
        p for d in SCANNED for p in sorted((ROOT / d).rglob("*.py")) if ".cache" not in p.parts
    ]
    assert len(files) > 50  # the scan sees the product's code
    findings = {
        f
        for path in files
        for f in _findings(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())
    }
    assert findings - ALLOWED == set()


def test_the_scan_catches_what_it_bans() -> None:
    source = (
        "import pickle\nimport importlib\nfrom marshal import loads\nimport json\n"
        "eval('1')\nexec('x = 1')\npickle.loads(b'')\njson.loads('1')\n"
        "importlib.import_module('os')\n__import__('os')\n"
    )
    assert sorted(name for _, name in _findings(source, "core/x.py")) == [
        "__import__",
        "eval",
        "exec",
        "from marshal import",
        "import pickle",
        "importlib.import_module",
        "pickle.loads",
    ]
    assert _findings("re.compile('x')\ncompile('1', 'f', 'eval')\n", "core/x.py") == [
        ("core/x.py", "compile")
    ]
