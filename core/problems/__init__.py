"""core.problems."""
