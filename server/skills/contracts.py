"""Section contracts read from the text, deterministically: typed inputs and outputs, resources, guards,
verifier conditions, and whether the section changes anything.

An artifact is a file name with a known extension (`report.csv` is a `csv`) or one of a fixed vocabulary of
artifact nouns (`pull request`, `chart`, `schema`). Whether it is read or written follows from the section's
role, or for operations from the verb before it. Missing or ambiguous effects count as state-changing,
as SkillZip asks: such a section must keep a path to a verifier.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .markdown import fenced
from .roles import Role

EXTENSION_KINDS = {
    "csv": "table", "tsv": "table", "xlsx": "table", "xls": "table", "parquet": "table",
    "json": "data", "jsonl": "data", "yaml": "config", "yml": "config", "toml": "config", "ini": "config",
    "env": "config", "xml": "data", "sql": "query", "md": "document", "txt": "document", "rst": "document",
    "pdf": "document", "docx": "document", "pptx": "slides", "html": "page", "png": "image", "jpg": "image",
    "jpeg": "image", "svg": "image", "gif": "image", "py": "code", "js": "code", "ts": "code", "tsx": "code",
    "jsx": "code", "sh": "code", "ipynb": "notebook", "log": "log", "zip": "archive", "tex": "document",
}  # fmt: skip
"""File extension -> artifact kind."""

ARTIFACT_NOUNS = {
    "pull request": "change", "commit": "change", "branch": "change", "diff": "change", "patch": "change",
    "issue": "ticket", "ticket": "ticket", "report": "document", "summary": "document", "document": "document",
    "spreadsheet": "table", "table": "table", "dataset": "data", "dataframe": "table", "chart": "image",
    "plot": "image", "figure": "image", "diagram": "image", "screenshot": "image", "schema": "schema",
    "test": "test", "migration": "change", "email": "message", "message": "message", "draft": "document",
    "presentation": "slides", "slide": "slides", "notebook": "notebook", "api key": "credential",
    "token": "credential", "credentials": "credential", "config": "config", "configuration": "config",
    "manifest": "config", "template": "document", "checklist": "document", "query": "query",
}  # fmt: skip
"""Artifact noun -> artifact kind (plurals are matched too)."""

# The patterns below are matched on lowercased text (several times faster than IGNORECASE).
_FILE = re.compile(r"(?<![\w/.-])([\w][\w./-]*\.(" + "|".join(EXTENSION_KINDS) + r"))\b")
_NOUN = re.compile(r"\b(" + "|".join(sorted(ARTIFACT_NOUNS, key=len, reverse=True)) + r")s?\b")
_WRITE = re.compile(
    r"\b(?:write|writes|save|saves|create|creates|generate|generates|produce|produces|export|exports|output|"
    r"outputs|emit|render|draft|open|opens|file|post|send|commit|push|update|updates|modify|delete|add|build|"
    r"deploy|install|run|execute|apply|edit|fix|refactor|merge|publish|upload|insert|replace|rename|move|"
    r"record|records|log|enter|fill|append|attach|print|mark)\b"
)
_READ = re.compile(
    r"\b(?:read|reads|load|loads|parse|parses|take|takes|given|receive|receives|accept|accepts|use|uses|from|"
    r"inspect|review|analy[sz]e|fetch|download|query|search|find|look up|check|examine|import)\b"
)
_SHELL_LANGS = frozenset({"bash", "sh", "shell", "console", "zsh", "powershell", "pwsh"})
_PROMPT = re.compile(r"^\s*(?:\$|>|PS>)\s+")
_COMMAND = re.compile(r"^[A-Za-z][\w.-]*$")
_GUARD = re.compile(r"\b(?:if|unless|only|before|must|never|always|do not|don't|requires?|ensure)\b")
_VERIFY = re.compile(
    r"\b(?:verify|verifies|check|checks|confirm|validate|assert|test|tests|ensure that|make sure|should (?:see|pass|"
    r"return|show)|expect(?:ed)?)\b"
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_MAX_CLAUSES = 8
_MAX_CLAUSE_CHARS = 240
_VERIFYING_ROLES = frozenset({Role.VERIFIER, Role.OPERATION, Role.OUTPUT})
_READ_ONLY_ROLES = frozenset(
    {Role.INTENT, Role.TRIGGER, Role.INPUT, Role.RESOURCE, Role.FAILURE, Role.VERIFIER, Role.PRECONDITION}
)


@dataclass(frozen=True, slots=True, order=True)
class Signature:
    """A typed artifact a section consumes or produces."""

    name: str
    """Normalized: lowercase, singular noun or file name."""
    kind: str


@dataclass(frozen=True, slots=True)
class Contract:
    inputs: tuple[Signature, ...]
    outputs: tuple[Signature, ...]
    resources: tuple[str, ...]
    """`file:PATH` for a linked file, `tool:NAME` for a command or an allowed tool the text uses."""
    guards: tuple[str, ...]
    """Conditions under which the section may run (`Only if...`, `Never...`)."""
    verifies: tuple[str, ...]
    """Conditions it checks."""
    state_changing: bool


def extract_contract(
    text: str, role: Role, linked_files: tuple[str, ...] = (), allowed_tools: tuple[str, ...] = ()
) -> Contract:
    """The contract of one section; `linked_files` are the resolved targets of its links."""
    prose = _without_code(text)
    lowered = prose.lower()
    reads, writes = _artifacts(lowered, role)
    tools = _commands(text)
    if allowed_tools:
        tools |= {t for t in _tool_names(allowed_tools) if re.search(rf"\b{re.escape(t)}\b", text)}
    resources = tuple(sorted({f"file:{path}" for path in linked_files} | {f"tool:{t}" for t in tools}))
    clauses = [c.strip(" -*>#\t") for c in _SENTENCE_END.split(prose) if c.strip(" -*>#\t")]
    guards = _pick(clauses, _GUARD) if _GUARD.search(lowered) else ()  # a clause's match is the prose's too
    verifies = _pick(clauses, _VERIFY) if role in _VERIFYING_ROLES and _VERIFY.search(lowered) else ()
    changing = role not in _READ_ONLY_ROLES and (
        bool(writes) or bool(_WRITE.search(lowered)) or not _READ.search(lowered)
    )
    return _interned(Contract(tuple(sorted(reads)), tuple(sorted(writes)), resources, guards, verifies, changing))


_INTERNED: dict[Contract, Contract] = {}
_MAX_INTERNED = 1 << 17


def _interned(contract: Contract) -> Contract:
    """One object for equal contracts. Libraries repeat sections, so most contracts recur (12K distinct among
    the 192K sections of 10K synthetic skills), and each takes about 270 bytes with its tuples and strings.
    The table is emptied when full: a contract met after that is shared from then on."""
    found = _INTERNED.get(contract)
    if found is None:
        if len(_INTERNED) >= _MAX_INTERNED:
            _INTERNED.clear()
        found = _INTERNED[contract] = contract
    return found


def _artifacts(prose: str, role: Role) -> tuple[set[Signature], set[Signature]]:
    """(read, written) artifacts of lowercased prose: by role, and for operations by the nearest verb before
    each mention."""
    reads: set[Signature] = set()
    writes: set[Signature] = set()
    for start, signature in _mentions(prose):
        if role in (Role.INPUT, Role.PRECONDITION, Role.TRIGGER, Role.VERIFIER):
            reads.add(signature)
        elif role is Role.OUTPUT:
            writes.add(signature)
        elif role is Role.OPERATION:
            before = prose[max(0, prose.rfind("\n", 0, start)) : start]
            write, read = _last(_WRITE, before), _last(_READ, before)
            if write > read:
                writes.add(signature)
            elif read > write:
                reads.add(signature)
    return reads, writes


def _mentions(prose: str) -> list[tuple[int, Signature]]:
    """Artifacts in order of mention in lowercased prose; a noun inside a file name (`manifest` in
    `manifest.csv`) is not one."""
    files = [(m.span(), Signature(m.group(1), EXTENSION_KINDS[m.group(2)])) for m in _FILE.finditer(prose)]
    found = [(start, signature) for (start, _), signature in files]
    for match in _NOUN.finditer(prose):
        if not any(start <= match.start() < end for (start, end), _ in files):
            noun = match.group(1)
            found.append((match.start(), Signature(noun, ARTIFACT_NOUNS[noun])))
    return sorted(found)


def _last(pattern: re.Pattern[str], text: str) -> int:
    """End of the last match in text, or -1."""
    end = -1
    for match in pattern.finditer(text):
        end = match.end()
    return end


def _without_code(text: str) -> str:
    """The text with fenced code blocks removed (their commands are resources, not prose)."""
    lines = text.splitlines()
    return "\n".join(line for line, in_code in zip(lines, fenced(lines), strict=True) if not in_code)


def _commands(text: str) -> set[str]:
    """Program names that start a line in a shell code block, or a line after a `$ ` prompt."""
    found: set[str] = set()
    if not any(mark in text for mark in ("```", "~~~", "$", ">")):  # no code block, no prompt
        return found
    lines = text.splitlines()
    in_code = fenced(lines)
    language = ""
    for index, line in enumerate(lines):
        if in_code[index] and (index == 0 or not in_code[index - 1]):
            language = line.strip().lstrip("`~").strip().split(" ", 1)[0].lower()  # the opening fence's info
            continue
        if not (_PROMPT.match(line) or (in_code[index] and language in _SHELL_LANGS)):
            continue
        words = _PROMPT.sub("", line).strip().split()
        if words and _COMMAND.match(words[0]):
            found.add(words[0].lower())
    return found


def _tool_names(allowed_tools: tuple[str, ...]) -> set[str]:
    """`Bash(git:*)` is the tool `Bash`; names shorter than three characters are too ambiguous to look for."""
    return {name for tool in allowed_tools if len(name := tool.split("(", 1)[0]) >= 3}


def _pick(clauses: list[str], pattern: re.Pattern[str]) -> tuple[str, ...]:
    picked = []
    for clause in clauses:
        if pattern.search(clause.lower()):
            picked.append(clause if len(clause) <= _MAX_CLAUSE_CHARS else clause[: _MAX_CLAUSE_CHARS - 3] + "...")
            if len(picked) == _MAX_CLAUSES:
                break
    return tuple(picked)
