"""Benchmark the skill registry against whole-skill retrieval, on the real corpus and synthetic libraries.

    python bench/skill_registry.py              # corpus, 1K and 10K synthetic skills (a few minutes)
    python bench/skill_registry.py --quick      # corpus and 1K
    python bench/skill_registry.py --sizes 1000 10000 100000   # add 100K (about half an hour, ~10 GB)

For each library it prints build time (Sec2Graph, token counts, indexes, MotifZip; parsing the packages
and the tokenizer's one-time load are not counted), hydration latency, compression ratio, dependency
preservation, verifier reachability, rendered tokens and retrieval quality (Ret@1, Ret@5, MRR), beside two
baselines measured in the same run on the same queries: BM25 over whole skills (retrieval), and loading
the top-5 whole skills (the usual context). For synthetic libraries, "planted" is the compression ratio
their planted routines alone allow (each compressed into one macro): what a compression figure there is
to be read against.
Synthetic queries ask for a skill's task in other words and know their target. The corpus has no such
queries: there each of 100 sampled skills is queried by the first sentence of its own description, a
weaker test (the words are the skill's own). Results go to stdout as a Markdown table and a PNG plot.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from synthetic import generate_library, generate_queries

from skillstate.clients import read_package_dir
from skillstate.server.skills.bm25 import BM25Index
from skillstate.server.skills.bulk import fewer_collections
from skillstate.server.skills.compressed import library_stats
from skillstate.server.skills.graph import SkillGraph, build_graph
from skillstate.server.skills.hydrate import hydrate
from skillstate.server.skills.library import SkillLibrary
from skillstate.server.skills.macro_index import MacroIndex
from skillstate.server.skills.macros import REFERENCE_TOKENS
from skillstate.server.skills.package import SkillPackage, load_package
from skillstate.server.skills.text import terms
from skillstate.server.skills.tokens import count_tokens

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "skills-corpus"
BUDGET = 3000
QUERIES = 100


@dataclass
class Result:
    library: str
    skills: int = 0
    build_seconds: float = 0.0
    stages: dict[str, float] = field(default_factory=dict)
    compression: float = 0.0
    planted_compression: float | None = None
    dependency_preservation: float = 0.0
    verifier_reachability: float = 0.0
    macros: int = 0
    rows: dict[str, dict[str, float]] = field(default_factory=dict)
    """method -> figures (latency_ms_p50, latency_ms_p95, tokens_p50, ret1, ret5, mrr)"""


def corpus_library() -> tuple[list[SkillPackage], list[tuple[str, str]]]:
    packages = []
    for skill_file in sorted(CORPUS.rglob("SKILL.md")):
        sent = read_package_dir(skill_file.parent)
        packages.append(load_package(sent.files, sent.folder))
    unique = list({p.name: p for p in packages}.values())
    rng = random.Random(0)
    sampled = rng.sample(unique, k=min(QUERIES, len(unique)))
    queries = [(re.split(r"(?<=[.!?])\s", p.description, maxsplit=1)[0], p.name) for p in sampled]
    return unique, queries


def synthetic_library(size: int) -> tuple[list[SkillPackage], list[tuple[str, str]], list[dict[str, str]]]:
    skills = generate_library(size, seed=1)
    packages = [load_package(s.files, s.folder) for s in skills]
    queries = [(q.text, q.target) for q in generate_queries(skills, QUERIES, seed=1)]
    return packages, queries, [s.routines for s in skills]


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
        graphs = timed(result, "Sec2Graph", lambda: [build_graph(p) for p in packages])
        library = SkillLibrary()
        timed(result, "tokens and indexes", lambda: [library.add(g, version=1) for g in graphs])
        macros = MacroIndex()
        tokens = {g.skill: library.get(g.skill).node_tokens for g in graphs}  # type: ignore[union-attr]
        timed(result, "MotifZip", lambda: macros.rebuild(graphs, tokens))
    result.build_seconds = time.perf_counter() - started
    return library, macros, graphs


def timed(result: Result, stage: str, work: Callable[[], object]) -> object:
    started = time.perf_counter()
    value = work()
    result.stages[stage] = time.perf_counter() - started
    print(f"    {stage}: {result.stages[stage]:.2f} s", file=sys.stderr, flush=True)
    return value


def evaluate(
    name: str, method: Callable[[str], tuple[list[str], int]], queries: list[tuple[str, str]]
) -> dict[str, float]:
    """Run a method (query -> (ranked skills, rendered tokens)) over the queries."""
    latencies, tokens, ranks = [], [], []
    for query, target in queries:
        started = time.perf_counter()
        ranking, rendered = method(query)
        latencies.append(time.perf_counter() - started)
        tokens.append(rendered)
        ranks.append(ranking.index(target) + 1 if target in ranking else None)
    ordered = sorted(latencies)
    return {
        "latency_ms_p50": ordered[len(ordered) // 2] * 1e3,
        "latency_ms_p95": ordered[int(len(ordered) * 0.95)] * 1e3,
        "tokens_p50": statistics.median(tokens),
        "ret1": sum(r == 1 for r in ranks) / len(ranks),
        "ret5": sum(r is not None and r <= 5 for r in ranks) / len(ranks),
        "mrr": sum(1 / r for r in ranks if r is not None) / len(ranks),
    }


def measure(
    label: str,
    packages: list[SkillPackage],
    queries: list[tuple[str, str]],
    planted: list[dict[str, str]] | None = None,
) -> Result:
    print(f"{label}: {len(packages)} skills, {len(queries)} queries", file=sys.stderr, flush=True)
    result = Result(label, len(packages))
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

    def skillzip(query: str) -> tuple[list[str], int]:
        hydration = hydrate(library, query, BUDGET, macros=macros)
        ranking = list(dict.fromkeys([*hydration.source_skills[:1], *hydration.ranked_skills]))
        return ranking, hydration.token_count

    whole = BM25Index[str]()
    body_tokens = {p.name: count_tokens(p.body) for p in packages}
    for package in packages:
        whole.add(package.name, terms(f"{package.name} {package.description} {package.body}"))

    def bm25_whole(query: str) -> tuple[list[str], int]:
        ranking = [name for name, _ in whole.search(terms(query), 20)]
        return ranking, body_tokens[ranking[0]] if ranking else 0

    def top5_whole(query: str) -> tuple[list[str], int]:
        ranking = [name for name, _ in whole.search(terms(query), 20)]
        return ranking, sum(body_tokens[n] for n in ranking[:5])

    for method, function in (("SkillZip (ours)", skillzip), ("BM25 whole skill", bm25_whole),
                             ("top-5 whole skills", top5_whole)):  # fmt: skip
        result.rows[method] = evaluate(method, function, queries)
        row = result.rows[method]
        print(f"    {method}: Ret@1 {row['ret1']:.2f}, {row['tokens_p50']:.0f} tokens, "
              f"{row['latency_ms_p50']:.1f} ms", file=sys.stderr, flush=True)  # fmt: skip
    return result


def table(results: list[Result]) -> str:
    lines = [
        "| library | method | build s | hydrate ms p50 / p95 | tokens p50 | Ret@1 | Ret@5 | MRR | compression "
        "| planted | DPR | VR |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        for method, row in r.rows.items():
            ours = method.startswith("SkillZip")
            lines.append(
                f"| {r.library} ({r.skills:,}) | {method} | {f'{r.build_seconds:.2f}' if ours else ''} "
                f"| {row['latency_ms_p50']:.1f} / {row['latency_ms_p95']:.1f} | {row['tokens_p50']:,.0f} "
                f"| {row['ret1']:.2f} | {row['ret5']:.2f} | {row['mrr']:.2f} "
                + (
                    f"| {r.compression:.2f}x ({r.macros} macros) "
                    f"| {f'{r.planted_compression:.2f}x' if r.planted_compression else ''} "
                    f"| {r.dependency_preservation:.1%} | {r.verifier_reachability:.1%} |"
                    if ours
                    else "| | | | |"
                )
            )
    return "\n".join(lines)


def plot(results: list[Result], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (tokens_axis, ret_axis) = plt.subplots(1, 2, figsize=(11, 4))
    methods = list(results[0].rows)
    width = 0.8 / len(methods)
    for offset, method in enumerate(methods):
        xs = [i + offset * width for i in range(len(results))]
        tokens_axis.bar(xs, [r.rows[method]["tokens_p50"] for r in results], width, label=method)
        ret_axis.bar(xs, [r.rows[method]["ret1"] for r in results], width, label=method)
    labels = [f"{r.library}\n{r.skills:,}" for r in results]
    for axis, title in ((tokens_axis, "rendered tokens (median)"), (ret_axis, "Ret@1")):
        axis.set_xticks([i + width * (len(methods) - 1) / 2 for i in range(len(results))], labels)
        axis.set_title(title)
    tokens_axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the corpus and 1K synthetic skills")
    parser.add_argument("--sizes", type=int, nargs="*", default=None, help="synthetic library sizes")
    parser.add_argument("--plot", type=Path, default=Path("docs/skill_registry.png"))
    args = parser.parse_args()
    sizes = args.sizes if args.sizes is not None else ([1000] if args.quick else [1000, 10_000])
    results = []
    if CORPUS.is_dir():
        results.append(measure("real corpus", *corpus_library()))
    for size in sizes:
        results.append(measure("synthetic", *synthetic_library(size)))
    print()
    print(table(results))
    try:
        plot(results, args.plot)
        print(f"\nplot: {args.plot}")
    except ImportError:
        print("\n(matplotlib is not installed: no plot)")


if __name__ == "__main__":
    main()
