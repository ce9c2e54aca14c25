"""Token counts by a real tokenizer: tiktoken's o200k_base, the encoding of current OpenAI models.

tiktoken downloads an encoding on first use unless `TIKTOKEN_CACHE_DIR` holds it. litellm (a dependency)
ships the encodings in its package, so when the variable is unset it points there, found without
importing litellm: counting works offline.
"""

from __future__ import annotations

import importlib.util
import os
from functools import cache
from pathlib import Path

import tiktoken

ENCODING = "o200k_base"


@cache
def _encoding() -> tiktoken.Encoding:
    if "TIKTOKEN_CACHE_DIR" not in os.environ:
        spec = importlib.util.find_spec("litellm")
        if spec is not None and spec.submodule_search_locations:
            bundled = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
            if bundled.is_dir():
                os.environ["TIKTOKEN_CACHE_DIR"] = str(bundled)
    return tiktoken.get_encoding(ENCODING)


def count_tokens(text: str) -> int:
    return len(_encoding().encode(text, disallowed_special=()))
