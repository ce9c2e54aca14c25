"""Benchmark the skill registry against whole-skill and section retrieval, on the real corpus and synthetic
libraries, per query kind.

    python bench/skill_registry.py              # corpus, 1K and 10K synthetic skills (several minutes)
    python bench/skill_registry.py --quick      # corpus and 1K
    python bench/skill_registry.py --sizes 1000 10000 100000   # add 100K

Each library is built (Sec2Graph, token counts and indexes, MotifZip; parsing the packages and the
tokenizer's one-time load are not counted) and queried by three kinds of query (bench/skill_queries.py):
descriptions, later sections of SKILL.md, and sections of `references/*.md`, 300 each where the library
has that many. Every query goes through hydration (budget 3,000 tokens) and three baselines in the same
run: BM25 over whole skills (SKILL.md and its Markdown references, loading SKILL.md), the top-5 whole
skills, and BM25 over sections without closure (ranked sections taken until the budget is spent). Reported
per method: latency (median, 95th percentile and slowest query), rendered tokens, Ret@1, Ret@5, MRR; for
section and reference queries the share of contexts at a 2,000-token budget holding the section the query
was made from, and holding it or the same routine (another occurrence of the macro that holds it), with
the budget they used;
for the two section-level methods the paper's structure metrics per context (seed 004, Appendix D):
dependency preservation (of the dependencies of the sections a context includes, the share it carries)
and verifier reachability (of its state-changing sections whose skill has a verifier, the share that reach
one inside it); for hydration, the fallback rate (whole-skill bundles) and the expansion rate (contexts
showing a macro below full text, fallbacks included). Results go to stdout as Markdown tables and a PNG.

A section query whose text several skills hold word for word is answered by a coin toss among them: which
of them the sampler made it from is invisible to every method. Beside each strict figure (Ret@1, Ret@5, MRR,
holds section) comes its expectation over that draw (`BenchQuery.odds`): an unbiased estimate of what the
strict figure samples, without the toss; and the ceiling no method ranking by the query's text can pass in
expectation: always ranking first the maker most likely to be the target.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from skill_queries import BenchQuery, description_query, section_queries
from synthetic import generate_library, generate_queries

from skillstate.clients import read_package_dir
from skillstate.server.skills.bm25 import BM25Index
from skillstate.server.skills.bulk import fewer_collections, settle_long_lived
from skillstate.server.skills.compressed import library_stats
from skillstate.server.skills.graph import EdgeKind, SkillGraph, build_graph
from skillstate.server.skills.hydrate import hydrate
from skillstate.server.skills.library import NodeKey, SkillLibrary, node_words
from skillstate.server.skills.macro_index import MacroIndex
from skillstate.server.skills.macros import REFERENCE_TOKENS, Level
from skillstate.server.skills.package import SkillPackage, load_package
from skillstate.server.skills.text import NodeWords, terms
from skillstate.server.skills.tokens import count_tokens

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "skills-corpus"
BUDGET = 3000
CONTAINMENT_BUDGET = 2000
QUERIES = 300
KINDS = ("description", "section", "reference")
SECTION_DEPENDENCIES = (EdgeKind.REQUIRES, EdgeKind.DATA)
"""Edges into a section naming what it needs (with `uses` out of it): what dependency preservation counts."""


@dataclass
class Context:
    """What one method gave for one query."""

    ranking: list[str]
    tokens: int
    selected: dict[str, set[int]] | None = None
    """Sections by skill, for the section-level methods."""
    text: str = ""
    fallback: bool = False
    expanded: bool = False


@dataclass
class Row:
    latency_ms_p50: float
    latency_ms_p95: float
    latency_ms_max: float
    tokens_p50: float
    ret1: float
    ret5: float
    mrr: float
    ret1_any: float
    """Ret@1 counting any skill that makes the very query (`BenchQuery.answers`), not only its target."""
    ret5_any: float
    ret1_expected: float
    """Strict Ret@1 in expectation over which maker the sampler picked (`BenchQuery.odds`): the value the
    strict figure is one draw of, without the coin toss among makers no text tells apart."""
    ret5_expected: float
    mrr_expected: float
    dependency_preservation: float | None = None
    verifier_reachability: float | None = None
    fallback: float | None = None
    expansion: float | None = None
    containment: float | None = None
    containment_tokens_p50: float | None = None
    routine_containment: float | None = None
    identical_containment: float | None = None
    """The share of contexts showing the section the query was made from or one that makes the very query."""
    expected_containment: float | None = None
    """`containment` in expectation over which maker the sampler picked, as `ret1_expected`."""


@dataclass
class Result:
    library: str
    skills: int = 0
    sections: int = 0
    build_seconds: float = 0.0
    stages: dict[str, float] = field(default_factory=dict)
    compression: float = 0.0
    planted_compression: float | None = None
    dependency_preservation: float = 0.0
    verifier_reachability: float = 0.0
    macros: int = 0
    rows: dict[tuple[str, str], Row] = field(default_factory=dict)
    """(query kind, method) -> figures"""
    queries: dict[str, int] = field(default_factory=dict)
    identifying: dict[str, float] = field(default_factory=dict)
    """Per query kind, the share of queries only their target makes (`BenchQuery.answers`)."""
    ceiling: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Per query kind, the best expected Ret@1 and Ret@5 any method can reach: ranking first the maker most
    likely to be the target (`BenchQuery.skill_odds`), then the next ones."""


def corpus_packages() -> list[SkillPackage]:
    """The real corpus's packages, one per skill name (a few names recur; the last read is kept)."""
    packages = []
    for skill_file in sorted(CORPUS.rglob("SKILL.md")):
        sent = read_package_dir(skill_file.parent)
        packages.append(load_package(sent.files, sent.folder))
    return list({p.name: p for p in packages}.values())


def corpus_library() -> tuple[list[SkillPackage], dict[str, list[BenchQuery]]]:
    packages = corpus_packages()
    return packages, _queries(packages, [description_query(p) for p in packages])


def synthetic_library(size: int) -> tuple[list[SkillPackage], dict[str, list[BenchQuery]], list[dict[str, str]]]:
    skills = generate_library(size, seed=1, references=True)
    packages = [load_package(s.files, s.folder) for s in skills]
    described = [BenchQuery(q.text, q.target, "description") for q in generate_queries(skills, QUERIES, seed=1)]
    return packages, _queries(packages, described), [s.routines for s in skills]


def _queries(packages: list[SkillPackage], described: list[BenchQuery]) -> dict[str, list[BenchQuery]]:
    by_kind = {"description": random.Random(0).sample(described, k=min(QUERIES, len(described)))}
    for kind in KINDS[1:]:
        if found := section_queries(packages, kind, QUERIES, seed=0):
            by_kind[kind] = found
    return by_kind


def planted_ratio(raw_tokens: int, planted: list[dict[str, str]]) -> float:
    """The compression ratio if exactly the planted routines were compressed, each into one macro over all
    its occurrences: how much recurring procedure the generator put in (other repetition comes on top)."""
    sizes: dict[str, list[int]] = {}
    for routines in planted:
        for routine, text in routines.items():
            sizes.setdefault(routine, []).append(count_tokens(text))
    saved = sum(max(0, sum(s) - min(s) - REFERENCE_TOKENS * len(s)) for s in sizes.values())
    return raw_tokens / (raw_tokens - saved)


def build(packages: list[SkillPackage], result: Result) -> tuple[SkillLibrary, MacroIndex, list[SkillGraph]]:
    count_tokens("")  # the tokenizer loads once per process (~0.3 s), as a server's does at start: not a build cost
    started = time.perf_counter()
    with fewer_collections():  # as the registry's rebuild does
        graphs: list[SkillGraph] = []
        timed(result, "Sec2Graph", lambda: graphs.extend(build_graph(p) for p in packages))
        library, macros = SkillLibrary(), MacroIndex()
        words: list[NodeWords] = []

        def index() -> None:
            for graph in graphs:
                words.append(node_words(graph))  # found once, read by the indexes and by MotifZip, as the registry does
                library.add(graph, 1, words[-1])
            library.settle()

        timed(result, "tokens and indexes", index)
        timed(result, "MotifZip", lambda: motifzip(library, macros, graphs, words))
    result.build_seconds = time.perf_counter() - started
    result.sections = sum(len(g.nodes) for g in graphs)
    settle_long_lived()  # as the registry does once a library is built: queries are timed without full collections
    return library, macros, graphs


def motifzip(library: SkillLibrary, macros: MacroIndex, graphs: list[SkillGraph], words: list[NodeWords]) -> None:
    rebuild = macros.rebuilding()
    for graph, graph_words in zip(graphs, words, strict=True):
        rebuild.add(graph, library.get(graph.skill).node_tokens, graph_words)  # type: ignore[union-attr]
    rebuild.finish()


def timed(result: Result, stage: str, work: Callable[[], object]) -> object:
    started = time.perf_counter()
    value = work()
    result.stages[stage] = time.perf_counter() - started
    print(f"    {stage}: {result.stages[stage]:.2f} s", file=sys.stderr, flush=True)
    return value


class Methods:
    """Hydration and the baselines over one built library: each maps (query, budget) to a Context."""

    def __init__(self, packages: list[SkillPackage], library: SkillLibrary, macros: MacroIndex) -> None:
        self.library, self.macros = library, macros
        self.whole: BM25Index[str] = BM25Index()
        self.body_tokens = {p.name: count_tokens(p.body) for p in packages}
        for package in packages:
            self.whole.add(package.name, terms(" ".join([package.name, package.description, *_markdown(package)])))
        self.sections: BM25Index[NodeKey] = BM25Index()
        for skill in library:
            for node in skill.graph.nodes:
                self.sections.add((skill.name, node.index), terms(f"{node.title} {node.text}"))
        self.whole.settle()  # built, not left to the first query
        self.sections.settle()
        settle_long_lived()

    def by_name(self) -> dict[str, Callable[[str, int], Context]]:
        return {
            "SkillZip (ours)": self.skillzip,
            "BM25 whole skill": self.bm25_whole,
            "top-5 whole skills": self.top5_whole,
            "BM25 sections, no closure": self.bm25_sections,
        }

    def skillzip(self, query: str, budget: int) -> Context:
        hydration = hydrate(self.library, query, budget, macros=self.macros)
        selected: dict[str, set[int]] = {}
        for name, index in hydration.sections:
            selected.setdefault(name, set()).add(index)
        return Context(
            list(dict.fromkeys([*hydration.source_skills[:1], *hydration.ranked_skills])),
            hydration.token_count,
            selected,
            hydration.context,
            hydration.whole_skill_fallback,
            hydration.whole_skill_fallback or any(b.level is not Level.FULL for b in hydration.macros),
        )

    def bm25_whole(self, query: str, budget: int) -> Context:
        ranking = [name for name, _ in self.whole.search(terms(query), 20)]
        return Context(ranking, self.body_tokens[ranking[0]] if ranking else 0)

    def top5_whole(self, query: str, budget: int) -> Context:
        ranking = [name for name, _ in self.whole.search(terms(query), 20)]
        return Context(ranking, sum(self.body_tokens[n] for n in ranking[:5]))

    def bm25_sections(self, query: str, budget: int) -> Context:
        selected: dict[str, set[int]] = {}
        texts, used = [], 0
        ranked = [key for key, _ in self.sections.search(terms(query), 200)]
        for name, index in ranked:
            skill = self.library.get(name)
            assert skill is not None
            cost = skill.node_tokens[index] + (0 if name in selected else count_tokens(skill.graph.description) + 8)
            if used + cost > budget:
                continue
            used += cost
            selected.setdefault(name, set()).add(index)
            texts.append(skill.graph.nodes[index].text)
        return Context(list(dict.fromkeys(name for name, _ in ranked)), used, selected, "\n".join(texts))


def _markdown(package: SkillPackage) -> list[str]:
    """SKILL.md's body and the package's Markdown references: the whole skill a whole-skill index reads."""
    texts = [package.body]
    for path in sorted(package.files):
        if path.startswith(f"{package.folder}/references/") and path.endswith(".md"):
            texts.append(package.files[path].decode("utf-8", errors="replace"))
    return texts


def evaluate(
    method: Callable[[str, int], Context],
    queries: list[BenchQuery],
    library: SkillLibrary,
    macros: MacroIndex,
    sections: bool,
) -> Row:
    latencies, tokens, ranks, answered, contexts = [], [], [], [], []
    expected: list[list[float]] = []
    """per query, the odds that each of the method's ranked skills is its target"""
    for query in queries:
        started = time.perf_counter()
        context = method(query.text, BUDGET)
        latencies.append(time.perf_counter() - started)
        tokens.append(context.tokens)
        ranks.append(context.ranking.index(query.target) + 1 if query.target in context.ranking else None)
        answers = query.answers
        answered.append(next((k + 1 for k, name in enumerate(context.ranking) if name in answers), None))
        odds = query.skill_odds
        expected.append([odds.get(name, 0.0) for name in context.ranking])
        contexts.append(context)
    ordered = sorted(latencies)
    row = Row(
        ordered[len(ordered) // 2] * 1e3,
        ordered[int(len(ordered) * 0.95)] * 1e3,
        ordered[-1] * 1e3,
        statistics.median(tokens),
        sum(r == 1 for r in ranks) / len(ranks),
        sum(r is not None and r <= 5 for r in ranks) / len(ranks),
        sum(1 / r for r in ranks if r is not None) / len(ranks),
        sum(r == 1 for r in answered) / len(answered),
        sum(r is not None and r <= 5 for r in answered) / len(answered),
        sum(odds[0] if odds else 0.0 for odds in expected) / len(expected),
        sum(sum(odds[:5]) for odds in expected) / len(expected),
        sum(sum(chance / (k + 1) for k, chance in enumerate(odds)) for odds in expected) / len(expected),
    )
    if contexts[0].selected is not None:
        row.dependency_preservation, row.verifier_reachability = structure(library, contexts)
        row.fallback = sum(c.fallback for c in contexts) / len(contexts)
        row.expansion = sum(c.expanded for c in contexts) / len(contexts)
        if sections:
            held, expected_held, identical, routine, used = [], [], [], [], []
            for query in queries:
                context = method(query.text, CONTAINMENT_BUDGET)
                held.append(holds_section(library, context, query))
                expected_held.append(holds_section_odds(library, context, query))
                identical.append(holds_identical(library, context, query))
                routine.append(holds_routine(library, macros, context, query))
                used.append(context.tokens)
            row.containment, row.containment_tokens_p50 = sum(held) / len(held), statistics.median(used)
            row.identical_containment = sum(identical) / len(identical)
            row.expected_containment = sum(expected_held) / len(expected_held)
            row.routine_containment = sum(routine) / len(routine)
    return row


def structure(library: SkillLibrary, contexts: list[Context]) -> tuple[float, float]:
    """Dependency preservation and verifier reachability, pooled over the contexts (seed 004, Appendix D)."""
    needed = carried = changing = reaching = 0
    for context in contexts:
        assert context.selected is not None
        for name, nodes in context.selected.items():
            graph = library.graph(name)
            for index in nodes:
                ends = [*graph.predecessors(index, *SECTION_DEPENDENCIES), *graph.successors(index, EdgeKind.USES)]
                needed += len(ends)
                carried += sum(end in nodes for end in ends)
                if graph.nodes[index].contract.state_changing and _reaches_verifier(graph, index, None):
                    changing += 1
                    reaching += _reaches_verifier(graph, index, nodes)
    return carried / needed if needed else 1.0, reaching / changing if changing else 1.0


def _reaches_verifier(graph: SkillGraph, index: int, within: set[int] | None) -> bool:
    """Whether a `verifies` edge leads from the node to a verifier (inside `within`, when given)."""
    return any(within is None or v in within for v in graph.successors(index, EdgeKind.VERIFIES))


def holds_section(library: SkillLibrary, context: Context, query: BenchQuery) -> bool:
    """Whether a context shows the full text of the section the query was made from."""
    assert query.section is not None
    return _shown(library, context, query.target, _section_index(library, query))


def holds_section_odds(library: SkillLibrary, context: Context, query: BenchQuery) -> float:
    """The probability that a context shows the section the query was made from, over which of its makers
    the sampler picked (`BenchQuery.odds`)."""
    return sum(chance for (skill, file, line), chance in zip(query.makers, query.odds, strict=True)
               if _shown(library, context, skill, _index_of(library, skill, (file, line))))  # fmt: skip


def holds_identical(library: SkillLibrary, context: Context, query: BenchQuery) -> bool:
    """Whether a context shows the section the query was made from, or a section that makes the very same
    query (the same heading and prose, in another skill)."""
    return any(_shown(library, context, skill, _index_of(library, skill, (file, line)))
               for skill, file, line in query.makers)  # fmt: skip


def holds_routine(library: SkillLibrary, macros: MacroIndex, context: Context, query: BenchQuery) -> bool:
    """Whether a context shows the section the query was made from, or, when that section is part of a
    macro, the same section of another of the macro's occurrences (the same routine in another skill)."""
    index = _section_index(library, query)
    held = macros.holder(query.target, index)
    if held is None:
        return _shown(library, context, query.target, index)
    macro, occurrence = held
    offset = index - occurrence.start
    return any(_shown(library, context, o.skill, o.start + offset) for o in macro.occurrences)


def _section_index(library: SkillLibrary, query: BenchQuery) -> int:
    assert query.section is not None
    return _index_of(library, query.target, query.section)


def _index_of(library: SkillLibrary, skill: str, section: tuple[str, int]) -> int:
    """The node of a skill cut at (file, first line)."""
    return next(n.index for n in library.graph(skill).nodes if (n.provenance.file, n.provenance.first_line) == section)


def _shown(library: SkillLibrary, context: Context, skill: str, index: int) -> bool:
    assert context.selected is not None
    return index in context.selected.get(skill, ()) and library.graph(skill).nodes[index].text.strip() in context.text


def measure(
    label: str,
    packages: list[SkillPackage],
    queries: dict[str, list[BenchQuery]],
    planted: list[dict[str, str]] | None = None,
) -> Result:
    counts = ", ".join(f"{len(q)} {kind}" for kind, q in queries.items())
    print(f"{label}: {len(packages)} skills; queries: {counts}", file=sys.stderr, flush=True)
    result = Result(label, len(packages), queries={kind: len(q) for kind, q in queries.items()})
    result.identifying = {kind: sum(len(q.answers) == 1 for q in qs) / len(qs) for kind, qs in queries.items()}
    result.ceiling = {kind: ceiling(qs) for kind, qs in queries.items()}
    library, macros, graphs = build(packages, result)
    compression = macros.compression()
    stats = library_stats(compression, graphs)
    result.compression, result.macros = stats.compression_ratio, stats.macros
    if planted is not None:
        result.planted_compression = planted_ratio(compression.raw_tokens, planted)
    result.dependency_preservation, result.verifier_reachability = (
        stats.dependency_preservation,
        stats.verifier_reachability,
    )
    methods = Methods(packages, library, macros)
    for kind, kind_queries in queries.items():
        for method, function in methods.by_name().items():
            row = result.rows[(kind, method)] = evaluate(function, kind_queries, library, macros, kind != "description")
            held = f", holds its section {row.containment:.2f}" if row.containment is not None else ""
            print(f"    {kind} / {method}: Ret@1 {row.ret1:.2f} (expected {row.ret1_expected:.3f}), "
                  f"Ret@5 {row.ret5:.2f} (any maker {row.ret1_any:.2f}, "
                  f"{row.ret5_any:.2f}), {row.tokens_p50:.0f} tokens, "
                  f"{row.latency_ms_p50:.1f} ms{held}", file=sys.stderr, flush=True)  # fmt: skip
    return result


def ceiling(queries: list[BenchQuery]) -> tuple[float, float]:
    """The best expected Ret@1 and Ret@5 over these queries (`Result.ceiling`)."""
    best = [sorted(q.skill_odds.values(), reverse=True) for q in queries]
    return sum(odds[0] for odds in best) / len(best), sum(sum(odds[:5]) for odds in best) / len(best)


def _percent(value: float | None) -> str:
    return "" if value is None else f"{value:.1%}"


def markdown_table(columns: list[str], rows: Iterable[list[str]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def retrieval_table(results: list[Result]) -> str:
    columns = ["library", "queries", "method", "ms p50 / p95 / max", "tokens p50", "Ret@1", "Ret@5", "MRR",
               "Ret@1 / Ret@5, any maker", "holds section / identical / routine (2K)", "DPR", "VR", "fallback",
               "expansion"]  # fmt: skip
    rows = []
    for r in results:
        for (kind, method), row in r.rows.items():
            holds = (
                f"{row.containment:.2f} / {row.identical_containment:.2f} / {row.routine_containment:.2f} "
                f"({row.containment_tokens_p50:,.0f} tokens)"
                if row.containment is not None
                and row.identical_containment is not None
                and row.routine_containment is not None
                and row.containment_tokens_p50 is not None
                else ""
            )
            rows.append([
                f"{r.library} ({r.skills:,})", f"{kind} ({r.queries[kind]}, {r.identifying[kind]:.0%} identifying)",
                method, f"{row.latency_ms_p50:.1f} / {row.latency_ms_p95:.1f} / {row.latency_ms_max:,.0f}",
                f"{row.tokens_p50:,.0f}", f"{row.ret1:.2f}", f"{row.ret5:.2f}", f"{row.mrr:.2f}",
                f"{row.ret1_any:.2f} / {row.ret5_any:.2f}", holds, _percent(row.dependency_preservation),
                _percent(row.verifier_reachability), _percent(row.fallback), _percent(row.expansion),
            ])  # fmt: skip
    return markdown_table(columns, rows)


def expected_table(results: list[Result]) -> str:
    """The strict figures as sampled beside their expectation over which maker the sampler picked, and the
    ceiling no method can pass in expectation, for the query kinds that have makers."""
    columns = ["library", "queries", "method", "Ret@1: sampled / expected (ceiling)",
               "Ret@5: sampled / expected (ceiling)", "MRR: sampled / expected",
               "holds section (2K): sampled / expected"]  # fmt: skip
    rows = []
    for r in results:
        for (kind, method), row in r.rows.items():
            if kind == "description":
                continue
            top1, top5 = r.ceiling[kind]
            holds = (
                f"{row.containment:.2f} / {row.expected_containment:.2f}"
                if row.containment is not None and row.expected_containment is not None
                else ""
            )
            rows.append([
                f"{r.library} ({r.skills:,})", f"{kind} ({r.queries[kind]})", method,
                f"{row.ret1:.2f} / {row.ret1_expected:.3f} ({top1:.3f})",
                f"{row.ret5:.2f} / {row.ret5_expected:.3f} ({top5:.3f})",
                f"{row.mrr:.2f} / {row.mrr_expected:.3f}", holds,
            ])  # fmt: skip
    return markdown_table(columns, rows)


def library_table(results: list[Result]) -> str:
    columns = ["library", "sections", "build s (Sec2Graph / indexes / MotifZip)", "compression", "planted",
               "library DPR", "library VR"]  # fmt: skip
    rows = []
    for r in results:
        stages = " / ".join(f"{s:.2f}" for s in r.stages.values())
        planted = f"{r.planted_compression:.2f}x" if r.planted_compression else ""
        rows.append([
            f"{r.library} ({r.skills:,})", f"{r.sections:,}", f"{r.build_seconds:.2f} ({stages})",
            f"{r.compression:.2f}x ({r.macros:,} macros)", planted, f"{r.dependency_preservation:.1%}",
            f"{r.verifier_reachability:.1%}",
        ])  # fmt: skip
    return markdown_table(columns, rows)


def plot(results: list[Result], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = list(dict.fromkeys(method for r in results for _, method in r.rows))
    groups = [(r, kind) for r in results for kind in r.queries]
    figure, (tokens_axis, ret_axis) = plt.subplots(2, 1, figsize=(max(8, len(groups) * 1.3), 7))
    width = 0.8 / len(methods)
    for offset, method in enumerate(methods):
        xs = [i + offset * width for i in range(len(groups))]
        tokens_axis.bar(xs, [r.rows[(k, method)].tokens_p50 for r, k in groups], width, label=method)
        ret_axis.bar(xs, [r.rows[(k, method)].ret1 for r, k in groups], width, label=method)
    labels = [f"{r.library} {r.skills:,}\n{kind}" for r, kind in groups]
    for axis, title in ((tokens_axis, "rendered tokens (median)"), (ret_axis, "Ret@1")):
        axis.set_xticks([i + width * (len(methods) - 1) / 2 for i in range(len(groups))], labels, fontsize=8)
        axis.set_title(title)
    tokens_axis.set_yscale("log")
    tokens_axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the corpus and 1K synthetic skills")
    parser.add_argument("--sizes", type=int, nargs="*", default=None, help="synthetic library sizes")
    parser.add_argument("--no-corpus", action="store_true", help="synthetic libraries only")
    parser.add_argument("--plot", type=Path, default=Path("docs/skill_registry.png"))
    args = parser.parse_args()
    sizes = args.sizes if args.sizes is not None else ([1000] if args.quick else [1000, 10_000])
    results = []
    if CORPUS.is_dir() and not args.no_corpus:
        results.append(measure("real corpus", *corpus_library()))
    for size in sizes:
        results.append(measure("synthetic", *synthetic_library(size)))
    print()
    print(library_table(results))
    print()
    print(retrieval_table(results))
    print()
    print(expected_table(results))
    try:
        plot(results, args.plot)
        print(f"\nplot: {args.plot}")
    except ImportError:
        print("\n(matplotlib is not installed: no plot)")


if __name__ == "__main__":
    main()
