"""Token counts by a real tokenizer: tiktoken's o200k_base, the encoding of current OpenAI models.

tiktoken downloads an encoding on first use unless its cache (`TIKTOKEN_CACHE_DIR`) holds it. The package
ships o200k_base (server/skills/encodings/, MIT, as tiktoken): when the variable is unset, the encoding is
read from there, so counting works offline and with no extra installed; where it is set, tiktoken's own
cache is used as the user configured it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import cache, lru_cache
from pathlib import Path

import tiktoken

ENCODING = "o200k_base"
_PRETOKENIZER = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
"""o200k_base's pre-tokenizer: text is cut into pieces by it, and each piece is encoded apart."""
SHIPPED = Path(__file__).parent / "encodings"
"""tiktoken's cache entry for o200k_base, shipped with the package."""


@cache
def _encoding() -> tiktoken.Encoding:
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return tiktoken.get_encoding(ENCODING)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(SHIPPED)  # read once; not left set for others in the process
    try:
        return tiktoken.get_encoding(ENCODING)
    finally:
        del os.environ["TIKTOKEN_CACHE_DIR"]


def count_tokens(text: str) -> int:
    return len(_encoding().encode(text, disallowed_special=()))


@lru_cache(maxsize=1 << 16)
def section_tokens(text: str) -> int:
    """`count_tokens` of a section's text, kept for the texts seen last: libraries repeat sections word for word,
    and a text seen lately is not encoded again (`library.forget_section_memos` empties it)."""
    return count_tokens(text)


def count_joined(lines: Sequence[str], known: dict[str, int]) -> int:
    """`count_tokens("\\n".join(lines))`, counted by parts that are encoded apart, each part's count kept in
    `known`: text that differs from one seen before in a few lines costs those lines.

    The encoding cuts text into pieces before encoding each (`_PRETOKENIZER`), and no piece spans the start
    of a line that begins with neither whitespace nor `/`: only a newline run or a run of punctuation ending
    in newlines and slashes can reach a line's start, and neither takes in another character. So the text
    splits there into parts whose counts add up. Under another pre-tokenizer the whole text is counted."""
    if not _pretokenized_as_known():
        return count_tokens("\n".join(lines))
    total, start = 0, 0
    for end in range(1, len(lines) + 1):
        if end == len(lines) or (lines[end][:1].strip() and not lines[end].startswith("/")):
            part = "\n".join(lines[start:end]) + ("\n" if end < len(lines) else "")
            count = known.get(part)
            if count is None:
                count = known[part] = count_tokens(part)
            total, start = total + count, end
    return total


@cache
def _pretokenized_as_known() -> bool:
    return getattr(_encoding(), "_pat_str", None) == _PRETOKENIZER
