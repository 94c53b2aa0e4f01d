"""The GSM8K replay problem's code (a package so its modules can import each other).

Loaded by `core.problems.load_problem` from `registries.py`; see README.md.
"""
