"""What an agent may spend on one step (`Limits`) and what it keeps of every model call (`StepRecord`,
`Recorder`, whose JSONL file is a run's `steps.jsonl`)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any


@dataclass(frozen=True)
class Limits:
    conflict_retries: int = 3
    """Fresh reads after ABORTED before a step is given up."""
    invalid_retries: int = 3
    """New answers after a malformed reply or an INVALID_ARGUMENT patch before a step is given up."""
    expansions: int = 3
    """Macros a step may ask to expand (`--rezip`); a further request is answered as a malformed reply."""


@dataclass(frozen=True)
class StepRecord:
    """One model call of one agent."""

    agent: str
    runtime: str
    step: int
    """The agent's step: one per observation it handled."""
    attempt: int
    prompt_tokens: int
    completion_tokens: int
    outcome: str
    """`applied`, `conflict`, `invalid` (refused by the server), `malformed` (not in the format), `summary`
    (a memory runtime's summarizing call), `expand` (`--rezip`: the model asked for a macro's full text;
    `action` is `expand <macro id>`), `abandoned` (the work was no longer the agent's when it answered:
    nothing submitted) or `gave_up` (out of retries: no change, action Wait)."""
    action: str | None = None
    patch: dict[str, Any] | None = None
    error: str | None = None
    revision: int | None = None
    conflict_paths: list[str] | None = None
    """With `conflict`: the JSON Pointers the server named."""
    cached_prompt_tokens: int = 0
    """Of `prompt_tokens`, those the provider served from its prompt cache, as it reported them."""


@dataclass
class Recorder:
    """Keeps every record and appends each to a JSONL file, if given."""

    path: Path | None = None
    records: list[StepRecord] = field(default_factory=list)
    _file: IO[str] | None = None

    def add(self, record: StepRecord) -> None:
        self.records.append(record)
        if self.path is not None:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = self.path.open("a", encoding="utf-8")
            self._file.write(json.dumps(asdict(record), sort_keys=True) + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
