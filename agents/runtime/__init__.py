"""One agent's step loop and its model path: its context (SKILL.state or a baseline), litellm, its server link."""
