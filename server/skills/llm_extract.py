"""The optional Sec2Graph extractor: a model reads each section and fills the same role and contract schema.

Any litellm model string works (with its usual API key in the environment). Calls use temperature 0 and at
most 512 completion tokens, and answers are cached by the hash of the model, the prompt version and the
section's title and text, so a section is asked about once (a cache file survives restarts). An answer
that is not the JSON the schema asks for is not guessed at: that section keeps the deterministic
extraction and the reason is logged. Nothing else of the server imports litellm; this module loads it on
first use.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .contracts import Contract, Signature
from .roles import Role

PROMPT_VERSION = 1
MAX_COMPLETION_TOKENS = 512
log = logging.getLogger(__name__)

_INSTRUCTIONS = """You read one section of an Agent Skills package (a SKILL.md) and describe its procedural role.
Answer with one JSON object and nothing else:
{"role": one of "intent", "trigger", "input", "precondition", "operation", "resource", "failure",
 "verifier", "output",
 "inputs": [{"name": artifact it reads, "kind": table|data|config|query|document|slides|page|image|code|
             notebook|log|archive|change|ticket|message|schema|test|credential}],
 "outputs": [the same shape, for artifacts it writes],
 "resources": ["tool:NAME" for programs it runs, "file:PATH" for files it needs],
 "guards": [conditions under which it may run, quoted from the text],
 "verifies": [conditions it checks, quoted from the text],
 "state_changing": whether following it may change anything (true when unsure)}
Only state what the text supports; use empty lists otherwise."""


class _Artifact(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=200)
    kind: str = Field(min_length=1, max_length=40)


class SectionExtraction(BaseModel):
    """What the model must answer for one section (unknown fields are refused)."""

    model_config = ConfigDict(extra="forbid")
    role: Literal[
        "intent", "trigger", "input", "precondition", "operation", "resource", "failure", "verifier", "output"
    ]
    inputs: list[_Artifact] = Field(default_factory=list, max_length=32)
    outputs: list[_Artifact] = Field(default_factory=list, max_length=32)
    resources: list[str] = Field(default_factory=list, max_length=32)
    guards: list[str] = Field(default_factory=list, max_length=16)
    verifies: list[str] = Field(default_factory=list, max_length=16)
    state_changing: bool = True

    def contract(self) -> Contract:
        return Contract(
            tuple(sorted({Signature(a.name.lower(), a.kind.lower()) for a in self.inputs})),
            tuple(sorted({Signature(a.name.lower(), a.kind.lower()) for a in self.outputs})),
            tuple(sorted(set(self.resources))),
            tuple(self.guards),
            tuple(self.verifies),
            self.state_changing,
        )


class LlmExtractor:
    """Role and contract of a section by a model; `cache` maps content hashes to validated answers."""

    def __init__(self, model: str, cache: MutableMapping[str, str] | None = None) -> None:
        self.model = model
        self.cache: MutableMapping[str, str] = cache if cache is not None else {}
        self.calls = 0
        """Model calls made (cache misses)."""

    def __call__(self, title: str, text: str, fallback: tuple[Role, Contract]) -> tuple[Role, Contract]:
        key = hashlib.sha256(json.dumps([self.model, PROMPT_VERSION, title, text]).encode()).hexdigest()
        answer = self.cache.get(key)
        if answer is None:
            answer = self._ask(title, text)
            if answer is None:
                return fallback
            self.cache[key] = answer
        extraction = SectionExtraction.model_validate_json(answer)
        return Role(extraction.role), extraction.contract()

    def _ask(self, title: str, text: str) -> str | None:
        """The model's validated answer as JSON, or None (logged) when it gave none."""
        import litellm

        self.calls += 1
        response: Any = litellm.completion(
            model=self.model,
            messages=[
                {"role": "system", "content": _INSTRUCTIONS},
                {"role": "user", "content": f"Section title: {title}\n\n{text}"},
            ],
            temperature=0,
            max_tokens=MAX_COMPLETION_TOKENS,
        )
        content = response.choices[0].message.content or ""
        try:
            extraction = SectionExtraction.model_validate_json(_json_object(content))
        except (ValidationError, ValueError) as e:
            log.warning(
                "%s gave no valid extraction for section %r (keeping the rule-based one): %s", self.model, title, e
            )
            return None
        return extraction.model_dump_json()


def _json_object(content: str) -> str:
    """The JSON object in an answer, also when a model wraps it in a code fence."""
    start, end = content.find("{"), content.rfind("}")
    if start == -1 or end < start:
        raise ValueError("the answer holds no JSON object")
    return content[start : end + 1]


class FileCache(MutableMapping[str, str]):
    """A cache of extractions in a JSON-lines file, appended to as answers arrive (thread-safe)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._entries: dict[str, str] = {}
        self._lock = threading.Lock()
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    key, value = json.loads(line)
                    self._entries[key] = value

    def __getitem__(self, key: str) -> str:
        return self._entries[key]

    def __setitem__(self, key: str, value: str) -> None:
        with self._lock:
            self._entries[key] = value
            with self._path.open("a", encoding="utf-8") as f:
                f.write(json.dumps([key, value]) + "\n")

    def __delitem__(self, key: str) -> None:
        raise TypeError("extractions are never forgotten")

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)
