"""A fresh PostgreSQL schema per run, for benchmarks and tests that start servers on one database."""

from __future__ import annotations

import re

import asyncpg

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


async def new_schema(url: str, schema: str) -> str:
    """Make an empty schema and return the `--db` URL whose tables go there (`?search_path=`)."""
    if not _IDENTIFIER.match(schema):
        raise ValueError(f"schema {schema!r}: expected a lower-case SQL identifier")
    connection = await asyncpg.connect(url)
    try:
        await connection.execute(f"CREATE SCHEMA {schema}")
    finally:
        await connection.close()
    return f"{url}{'&' if '?' in url else '?'}search_path={schema}"
