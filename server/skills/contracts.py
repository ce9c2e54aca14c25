"""Section contracts read from the text, deterministically: typed inputs and outputs, resources, guards,
verifier conditions, and whether the section changes anything.

An artifact is a file name with a known extension (`report.csv` is a `csv`) or one of a fixed vocabulary of
artifact nouns (`pull request`, `chart`, `schema`). Whether it is read or written follows from the section's
role, or for operations from the verb before it. Missing or ambiguous effects count as state-changing,
as SkillZip asks: such a section must keep a path to a verifier.
"""

from __future__ import annotations

import bisect
import re
import threading
from collections.abc import Iterable
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
_RUN = re.compile(r"\w+|\W+")
_WORD = re.compile(r"\w")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_MAX_CLAUSES = 8
_MAX_CLAUSE_CHARS = 240
_READING_ROLES = frozenset({Role.INPUT, Role.PRECONDITION, Role.TRIGGER, Role.VERIFIER})
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
        tools |= _finder(allowed_tools).named_in(text)
    resources = tuple(sorted({f"file:{path}" for path in linked_files} | {f"tool:{t}" for t in tools}))
    clauses = [c.strip(" -*>#\t") for c in _SENTENCE_END.split(prose) if c.strip(" -*>#\t")]
    guards = _pick(clauses, _GUARD) if _GUARD.search(lowered) else ()  # a clause's match is the prose's too
    verifies = _pick(clauses, _VERIFY) if role in _VERIFYING_ROLES and _VERIFY.search(lowered) else ()
    changing = role not in _READ_ONLY_ROLES and (
        bool(writes) or bool(_WRITE.search(lowered)) or not _READ.search(lowered)
    )
    return interned(Contract(tuple(sorted(reads)), tuple(sorted(writes)), resources, guards, verifies, changing))


_INTERNED: dict[Contract, Contract] = {}
_MAX_INTERNED = 1 << 17


def interned(contract: Contract) -> Contract:
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
    each mention on its line."""
    if role in _READING_ROLES:
        return {signature for _, signature in _mentions(prose)}, set()
    if role is Role.OUTPUT:
        return set(), {signature for _, signature in _mentions(prose)}
    reads: set[Signature] = set()
    writes: set[Signature] = set()
    mentions = _mentions(prose) if role is Role.OPERATION else []  # an intent, resource or failure: neither
    if not mentions:
        return reads, writes
    write_ends, read_ends = _ends(_WRITE, prose), _ends(_READ, prose)
    line = searched = 0
    for start, signature in mentions:  # in order, so each stretch of prose is searched for a newline once
        line = max(line, prose.rfind("\n", searched, start))
        searched = start
        write, read = _last(write_ends, line, start), _last(read_ends, line, start)
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
    starts = [start for start, _ in found]
    for match in _NOUN.finditer(prose):
        before = bisect.bisect_right(starts, match.start()) - 1  # file names never overlap: only this one may hold it
        if before < 0 or match.start() >= files[before][0][1]:
            noun = match.group(1)
            found.append((match.start(), Signature(noun, ARTIFACT_NOUNS[noun])))
    return sorted(found)


def _ends(pattern: re.Pattern[str], text: str) -> list[int]:
    return [match.end() for match in pattern.finditer(text)]


def _last(ends: list[int], line: int, start: int) -> int:
    """End of the last match in text[line:start], from the ends of the pattern's matches in the whole text, or
    -1. The verbs' matches never hold a newline, and a mention starts a word after a non-word character, so
    these are the matches of the slice itself (without slicing and searching it again for each mention)."""
    index = bisect.bisect_right(ends, start) - 1
    return ends[index] if index >= 0 and ends[index] > line else -1


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


class _ToolFinder:
    """Which allowed tools a text names, as a search for `\\bNAME\\b` finds them, for all names in one pass.

    Such a match starts and ends where a word character meets a non-word one or the text's end, so the name's
    runs of word and of non-word characters are whole runs of the text, one after another; a non-word run at
    either end of the text is in no match. The names' runs are matched with Aho-Corasick, built once for a
    package's sections: a search per name in each section cost names times text, and a package may allow
    200,000 names and hold 2,500 sections.
    """

    def __init__(self, names: Iterable[str]) -> None:
        names = list(names)
        self._tokens: dict[str, int] = {}
        sequences = [[self._tokens.setdefault(run, len(self._tokens)) for run in _RUN.findall(n)] for n in names]
        self._width = len(self._tokens)
        self._goto: dict[int, int] = {}
        """`state * width + token` -> the next state (one flat table: a dict per state would take far more)."""
        parent, via, depth = [0], [0], [0]
        self._name: dict[int, str] = {}
        for name, sequence in zip(names, sequences, strict=True):
            state = 0
            for token in sequence:
                key = state * self._width + token
                if key not in self._goto:
                    self._goto[key] = len(parent)
                    parent.append(state)
                    via.append(token)
                    depth.append(depth[state] + 1)
                state = self._goto[key]
            self._name[state] = name
        self._fail = [0] * len(parent)
        self._hit = [0] * len(parent)
        """The state itself if it ends a name, else the nearest state its failure links reach that does (or 0)."""
        for state in sorted(range(1, len(parent)), key=depth.__getitem__):
            if parent[state]:
                self._fail[state] = self._next(self._fail[parent[state]], via[state])
            self._hit[state] = state if state in self._name else self._hit[self._fail[state]]

    def _next(self, state: int, token: int) -> int:
        while (found := self._goto.get(state * self._width + token)) is None and state:
            state = self._fail[state]
        return found or 0

    def named_in(self, text: str) -> set[str]:
        runs = _RUN.findall(text)
        tokens = [self._tokens.get(run, -1) for run in runs]
        for end in (0, -1):
            if runs and not _WORD.match(runs[end]):
                tokens[end] = -1
        named: set[str] = set()
        reported: set[int] = set()
        state = 0
        for token in tokens:
            state = self._next(state, token) if token >= 0 else 0
            hit = self._hit[state]
            while hit and hit not in reported:  # a state reported has had its failure chain reported too
                reported.add(hit)
                named.add(self._name[hit])
                hit = self._hit[self._fail[hit]]
        return named


_FINDERS = threading.local()


def _finder(allowed_tools: tuple[str, ...]) -> _ToolFinder:
    """The finder of the last allowed tools this thread was given: a package's sections come one after another,
    with the package's own tuple."""
    last: tuple[tuple[str, ...], _ToolFinder] | None = getattr(_FINDERS, "last", None)
    if last is None or last[0] is not allowed_tools:
        last = _FINDERS.last = (allowed_tools, _ToolFinder(_tool_names(allowed_tools)))
    return last[1]


def _pick(clauses: list[str], pattern: re.Pattern[str]) -> tuple[str, ...]:
    picked = []
    for clause in clauses:
        if pattern.search(clause.lower()):
            picked.append(clause if len(clause) <= _MAX_CLAUSE_CHARS else clause[: _MAX_CLAUSE_CHARS - 3] + "...")
            if len(picked) == _MAX_CLAUSES:
                break
    return tuple(picked)
