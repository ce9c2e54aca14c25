"""Agents at once over one execution: the team agent, claims written in Σ, and the group chat's floor."""
