"""The scripted test policy's memory of what only a conversation or a summary says (`--recall`): each fact
recalled with a probability, drawn per fact and prompt, so anew at every step."""

from __future__ import annotations

import hashlib
import random
from typing import Any

DEFAULT_RECALL = 0.95
"""The test policy's recall in sim and demo: below 1, so that a runtime whose context only implies a fact (a
transcript, a summary) scores below one that states it (Σ); `--recall 1` replays transcripts perfectly."""


def recalled(facts: dict[str, Any], prompt: str, recall: float) -> dict[str, Any]:
    """The facts a reader of `prompt` recalls, each with probability `recall` (1: all of them)."""
    if recall >= 1:
        return facts
    digest = hashlib.sha256(prompt.encode()).hexdigest()
    return {key: value for key, value in facts.items() if random.Random(f"{digest}:{key}").random() < recall}
