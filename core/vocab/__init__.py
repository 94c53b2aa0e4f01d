"""The shared vocabulary of the search and the run store: the search events (`events`) and the
Pareto math (`pareto`), below both `core.search` and `core.storage` so that the store never
imports the search engine (and the engine imports the store only to journal and resume).
"""
