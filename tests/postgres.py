"""A PostgreSQL database for tests: `SKILLSTATE_TEST_POSTGRES` names one (.ci/run starts Debian's server and
sets it). Each test gets a fresh schema, dropped afterwards. Without the variable, PostgreSQL tests are
skipped with the reason; with `SKILLSTATE_REQUIRE_POSTGRES=1` (CI) a missing database fails them instead."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

DSN = os.environ.get("SKILLSTATE_TEST_POSTGRES")
REQUIRED = os.environ.get("SKILLSTATE_REQUIRE_POSTGRES") == "1"


@pytest.fixture
def postgres_schema() -> Iterator[tuple[str, str]]:
    """(DSN, schema): an empty schema of the test database. A plain fixture, so that async fixtures can ask
    for it by name; the schema is dropped from a thread of its own, outside the test's event loop."""
    if DSN is None:
        if REQUIRED:
            pytest.fail("SKILLSTATE_REQUIRE_POSTGRES=1 but SKILLSTATE_TEST_POSTGRES names no database")
        pytest.skip("PostgreSQL tests SKIPPED: set SKILLSTATE_TEST_POSTGRES=postgresql://... (.ci/run does)")
    schema = f"test_{uuid.uuid4().hex[:12]}"
    yield DSN, schema
    with ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, _execute(DSN, f"DROP SCHEMA IF EXISTS {schema} CASCADE")).result()


@pytest.fixture
def postgres_url(postgres_schema: tuple[str, str]) -> str:
    """A `--db` URL whose tables go to a fresh schema (`?search_path=`), the schema made beforehand."""
    from bench.postgres_schema import new_schema

    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, new_schema(*postgres_schema)).result()


async def _execute(dsn: str, sql: str) -> None:
    import asyncpg

    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute(sql)
    finally:
        await connection.close()
