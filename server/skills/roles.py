"""The nine operational roles of a section node, decided by deterministic rules (docs/skills.md).

A heading says what its section is for more reliably than its prose, so rules on the title come first; a
section whose title matches none is judged by cue phrases in its text, and a numbered step by its leading
verb. The first part of a skill (its preamble or top heading) states its intent.
"""

from __future__ import annotations

import re
from enum import StrEnum


class Role(StrEnum):
    INTENT = "intent"
    TRIGGER = "trigger"
    INPUT = "input"
    PRECONDITION = "precondition"
    OPERATION = "operation"
    RESOURCE = "resource"
    FAILURE = "failure"
    VERIFIER = "verifier"
    OUTPUT = "output"


def _words(*phrases: str) -> re.Pattern[str]:
    return re.compile(r"\b(?:" + "|".join(phrases) + r")\b", re.IGNORECASE)


TITLE_RULES: tuple[tuple[Role, re.Pattern[str]], ...] = (
    (
        Role.TRIGGER,
        _words(
            r"when to (?:use|apply|invoke|activate)",
            "when not to use",
            "use cases?",
            "triggers?",
            "activation",
            "when this skill",
            "use this skill",
        ),
    ),
    (
        Role.FAILURE,
        _words(
            "troubleshoot(?:ing)?",
            r"errors?(?: handling)?",
            "common (?:issues|problems|mistakes|errors)",
            "pitfalls?",
            "gotchas?",
            "recovery",
            "failures?",
            "known issues",
            "debugging",
            "anti-?patterns?",
            "limitations",
            "what to avoid",
            "caveats",
        ),
    ),
    (
        Role.VERIFIER,
        _words(
            "verif(?:y|ication)",
            "validat(?:e|ion)",
            "testing",
            "tests?",
            "checklists?",
            "quality (?:checks?|gates?)",
            "success criteria",
            "acceptance",
            "review",
            "sanity checks?",
            "self-check",
        ),
    ),
    (
        Role.OUTPUT,
        _words(
            "outputs?",
            "output format",
            "deliverables?",
            "results?",
            "reports?",
            "response format",
            "expected output",
            "returns?",
            "final answer",
            "format of the answer",
            "summary format",
        ),
    ),
    (
        Role.INPUT,
        _words(
            "inputs?",
            "parameters?",
            "arguments?",
            "required information",
            "what you need",
            "information to gather",
            "options",
            "variables",
        ),
    ),
    (
        Role.PRECONDITION,
        _words(
            "prerequisites?",
            "requirements?",
            "setup",
            "set up",
            "installation",
            "install",
            "before you (?:begin|start)",
            "dependencies",
            "environment",
            "authentication",
            "configuration",
            "getting started",
            "constraints",
            "rules",
            "guardrails",
            "important",
            "principles",
        ),
    ),
    (
        Role.RESOURCE,
        _words(
            "resources?",
            "references?",
            "scripts?",
            "tools?",
            "assets?",
            "links?",
            "see also",
            "related",
            "documentation",
            "templates?",
            "api",
            "further reading",
            "files?",
            "bundled",
            "commands?",
            "glossary",
            "cheat ?sheet",
        ),
    ),
    (
        Role.INTENT,
        _words(
            "overview",
            "purpose",
            "about",
            "introduction",
            "goal",
            "summary",
            "what (?:this|it) does",
            "description",
            "capabilities",
            "core capabilities",
            "key features",
            "context",
        ),
    ),
    (
        Role.OPERATION,
        _words(
            "workflow",
            "steps?",
            "process",
            "procedure",
            "instructions",
            "usage",
            "how to",
            "quick ?start",
            "implementation",
            "phase",
            "examples?",
            "patterns?",
            "best practices",
            "tips",
            "guidelines",
            "approach",
            "methodology",
        ),
    ),
)
"""Checked in order: the first role whose pattern the title matches wins."""

CONTENT_RULES: tuple[tuple[Role, re.Pattern[str]], ...] = (
    (
        Role.VERIFIER,
        _words("verify", "confirm that", "check that", "make sure", "validate", "assert", "should (?:see|pass|return)"),
    ),
    (
        Role.FAILURE,
        _words("if (?:it|this|that|the \\w+) fails", "on error", "on failure", "troubleshoot", "fall ?back"),
    ),
    (Role.OUTPUT, _words("output", "deliver", "return the", "respond with", "report back", "final (?:answer|report)")),
    (Role.PRECONDITION, _words("before (?:you|starting|running)", "requires?", "must have", "install")),
)
"""For a section whose title matched no rule: the first cue its text holds, else operation."""

STEP_RULES: tuple[tuple[Role, re.Pattern[str]], ...] = (
    (
        Role.VERIFIER,
        re.compile(r"^\W*(?:verify|check|confirm|validate|test|ensure|review|assert|run the tests)\b", re.I),
    ),
    (
        Role.OUTPUT,
        re.compile(
            r"^\W*(?:save|write|output|return|report|deliver|present|export|publish|summari[sz]e|respond)\b", re.I
        ),
    ),
    (Role.INPUT, re.compile(r"^\W*(?:ask|gather|collect|identify|get|obtain|read|load|receive|determine)\b", re.I)),
    (
        Role.PRECONDITION,
        re.compile(r"^\W*(?:install|set ?up|configure|prepare|create a virtual|authenticate|log ?in)\b", re.I),
    ),
    (
        Role.FAILURE,
        re.compile(r"^\W*(?:if\b.*\b(?:fails?|errors?)|on (?:error|failure)|handle errors?|retry|roll ?back)\b", re.I),
    ),
)
"""A numbered step's leading words; a step matching none is an operation."""

_STEP_NUMBER = re.compile(r"^\s*\d{1,3}[.)]\s*")


def role_of(title: str, text: str, *, is_first: bool, is_step: bool) -> Role:
    """The role of one part of a skill; see the rule tables above."""
    if is_step:
        lead = _STEP_NUMBER.sub("", text, count=1).lstrip("*_` ")
        return next((role for role, pattern in STEP_RULES if pattern.search(lead)), Role.OPERATION)
    if is_first:
        return Role.INTENT
    for role, pattern in TITLE_RULES:
        if pattern.search(title):
            return role
    return next((role for role, pattern in CONTENT_RULES if pattern.search(text)), Role.OPERATION)
