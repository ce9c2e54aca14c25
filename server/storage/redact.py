"""Database locations as they may be shown: a `--db` URL without its password, for logs, errors and output."""

from __future__ import annotations

import re

_USER_PASSWORD = re.compile(r"://([^:@/]*):[^@/]*@")
_PASSWORD_PARAMETER = re.compile(r"([?&]password=)[^&]*", re.IGNORECASE)


def redact(db: str) -> str:
    """`db` with any password (`user:password@` or `?password=`) replaced by `***`; a file path as it is."""
    return _PASSWORD_PARAMETER.sub(r"\1***", _USER_PASSWORD.sub(r"://\1:***@", db))
