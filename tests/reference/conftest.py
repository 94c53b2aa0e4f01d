"""tests/reference: every code example of the reference library's five docs, transcribed.

Each test is one example with only the import changed (`from orqest... import X` ->
`from core import X`), on pydantic-ai function models, asserting the documented outcome. An
example of a part not built yet is `xfail(strict=True)` naming the capability it waits for.
"""
