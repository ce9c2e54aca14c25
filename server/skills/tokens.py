"""Token counts by a real tokenizer: tiktoken's o200k_base, the encoding of current OpenAI models.

tiktoken downloads an encoding on first use unless its cache (`TIKTOKEN_CACHE_DIR`) holds it. The package
ships o200k_base (server/skills/encodings/, MIT, as tiktoken): when the variable is unset, the encoding is
read from there, so counting works offline and with no extra installed; where it is set, tiktoken's own
cache is used as the user configured it.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import tiktoken

ENCODING = "o200k_base"
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
