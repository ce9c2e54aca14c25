"""Rendering hydrated contexts: skills, their selected sections, and macros at a level of detail.

A macro occurrence shows at one of four levels (SkillZip's): its name; its contract (what it reads,
writes and uses, its guards and checks); an outline (each section's title and first sentence); or its full
source text, exactly. Every level below full says how to expand it.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .graph import SectionNode, SkillGraph
from .macros import Level, Macro, Occurrence

MAX_CONTRACT_ITEMS = 6
_FIRST_SENTENCE = re.compile(r"^(.{1,200}?[.!?:])(?:\s|$)", re.DOTALL)


@dataclass(frozen=True)
class MacroBlock:
    """A macro occurrence in a context, and the level it is shown at."""

    macro: Macro
    occurrence: Occurrence
    level: Level


def render_context(
    graphs: Mapping[str, SkillGraph],
    selected: dict[str, set[int]],
    block_of: Callable[[str, int], MacroBlock | None],
) -> str:
    """Each skill's name and description, then its selected sections in source order (a macro occurrence as
    one block, and a macro shown once per context: later occurrences point back to it), omitted runs marked.
    Sections of a Markdown reference follow SKILL.md's under a line naming their file."""
    return "\n".join(render_lines(graphs, selected, block_of))


def render_lines(
    graphs: Mapping[str, SkillGraph],
    selected: dict[str, set[int]],
    block_of: Callable[[str, int], MacroBlock | None],
) -> list[str]:
    """The lines `render_context` joins with newlines (no word spans two of them)."""
    lines: list[str] = []
    shown: set[str] = set()
    for name, chosen in selected.items():
        graph = graphs[name]
        lines.append(f"# Skill: {name}\n{graph.description}\n")
        previous, file = -1, graph.body_file
        for index in sorted(chosen):
            if index <= previous:
                continue  # inside a macro block already shown (a macro never spans two files)
            if graph.nodes[index].provenance.file != file:
                _omitted_to_end_of_file(graph, previous, lines)
                file = graph.nodes[index].provenance.file
                lines.append(f"[from {_relative(file, graph.body_file)}]\n")
                previous = _first_of_file(graph, index) - 1
            if index > previous + 1:
                omitted = index - previous - 1
                lines.append(f"[{omitted} section{'s' if omitted > 1 else ''} omitted]\n")
            block = block_of(name, index)
            if block is None:
                lines.append(graph.nodes[index].text.rstrip("\n") + "\n")
                previous = index
            else:
                if block.macro.macro_id in shown:
                    lines.append(f'[macro {block.macro.macro_id} "{block.macro.name}": as shown above]\n')
                else:
                    lines.append(render_macro(graph, block))
                    shown.add(block.macro.macro_id)
                previous = block.occurrence.start + block.occurrence.length - 1
    return lines


def _omitted_to_end_of_file(graph: SkillGraph, previous: int, lines: list[str]) -> None:
    """Mark the sections after `previous` to the end of its file as omitted."""
    if previous < 0:
        return
    file, last = graph.nodes[previous].provenance.file, previous
    while last + 1 < len(graph.nodes) and graph.nodes[last + 1].provenance.file == file:
        last += 1
    if last > previous:
        omitted = last - previous
        lines.append(f"[{omitted} section{'s' if omitted > 1 else ''} omitted]\n")


def _first_of_file(graph: SkillGraph, index: int) -> int:
    file = graph.nodes[index].provenance.file
    while index > 0 and graph.nodes[index - 1].provenance.file == file:
        index -= 1
    return index


def _relative(file: str, body_file: str) -> str:
    """A reference's path as the skill names it: relative to SKILL.md's folder when inside it."""
    folder = posixpath.dirname(body_file)
    return file[len(folder) + 1 :] if folder and file.startswith(folder + "/") else file


def macro_block(graph: SkillGraph, macro: Macro, occurrence: Occurrence, level: Level) -> MacroBlock:
    """A block at `level`, or at FULL when the full text is no longer than the summary (the lowest
    sufficient level is also the cheapest)."""
    if level is not Level.FULL:
        nodes = [graph.nodes[i] for i in occurrence.nodes]
        if len(_summary(macro, nodes, level)) >= len("".join(node.text for node in nodes).rstrip("\n") + "\n"):
            level = Level.FULL
    return MacroBlock(macro, occurrence, level)


def render_macro(graph: SkillGraph, block: MacroBlock) -> str:
    nodes = [graph.nodes[i] for i in block.occurrence.nodes]
    if block.level is Level.FULL:
        return "".join(node.text for node in nodes).rstrip("\n") + "\n"
    return _summary(block.macro, nodes, block.level)


def _summary(macro: Macro, nodes: list[SectionNode], level: Level) -> str:
    head = f'[macro {macro.macro_id} "{macro.name}", {len(nodes)} section{"s" if len(nodes) > 1 else ""}'
    if level is Level.NAME:
        return f"{head}; expand it for its contract or text]\n"
    if level is Level.OUTLINE:
        lines = [f"{head}, outline; expand it for the full text]"]
        for node in nodes:
            body = node.text.split("\n", 1)[1] if node.text.lstrip().startswith("#") else node.text
            first = _FIRST_SENTENCE.match(" ".join(body.split()))
            lines.append(f"- {node.title}: {first.group(1) if first else ' '.join(body.split())[:200]}")
        return "\n".join(lines) + "\n"
    contracts = [node.contract for node in nodes]
    fields = (
        ("reads", sorted({f"{s.name} ({s.kind})" for c in contracts for s in c.inputs})),
        ("writes", sorted({f"{s.name} ({s.kind})" for c in contracts for s in c.outputs})),
        ("uses", sorted({r for c in contracts for r in c.resources})),
        ("guards", [g for c in contracts for g in c.guards]),
        ("checks", [v for c in contracts for v in c.verifies]),
    )
    lines = [f"{head}, contract; expand it for the full text]"]
    lines += [f"{label}: {'; '.join(items[:MAX_CONTRACT_ITEMS])}" for label, items in fields if items]
    return "\n".join(lines) + "\n"
