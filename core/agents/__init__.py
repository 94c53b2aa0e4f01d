"""core.agents."""
