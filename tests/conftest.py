"""Shared fixtures: a real gRPC server on a loopback port and the real client."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

from skillstate.clients import StateClient
from skillstate.server.engine.config import EngineConfig
from skillstate.server.rpc.app import RunningServer, start_server
from skillstate.server.storage.revision_log.sqlite import SqliteRevisionLog
from skillstate.server.storage.skill_store.sqlite import SqliteSkillStore

settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", parent=settings.get_profile("default"), derandomize=True, max_examples=200)
settings.register_profile("thorough", parent=settings.get_profile("default"), max_examples=2000)
settings.load_profile("default")  # .ci/run passes --hypothesis-profile=ci; --hypothesis-profile=thorough runs longer


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state.db"


@pytest.fixture
def engine_config() -> EngineConfig:
    return EngineConfig()


@pytest.fixture
async def server(db_path: Path, engine_config: EngineConfig) -> AsyncIterator[RunningServer]:
    running = await start_server(SqliteRevisionLog(db_path), "127.0.0.1:0", engine_config, SqliteSkillStore(db_path))
    yield running
    await running.stop(grace=0)


@pytest.fixture
def server_address(server: RunningServer) -> str:
    return f"127.0.0.1:{server.port}"


@pytest.fixture
async def client(server: RunningServer) -> AsyncIterator[StateClient]:
    async with StateClient(f"127.0.0.1:{server.port}") as c:
        yield c


class RestartableServer:
    """A real server on one SQLite file that a test can stop and start again on the same port."""

    def __init__(self, db: Path, config: EngineConfig = EngineConfig()) -> None:
        self._db, self._config = db, config
        self._running: RunningServer | None = None
        self.port = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._running = await start_server(
            SqliteRevisionLog(self._db), self.address, self._config, skills=SqliteSkillStore(self._db)
        )
        self.port = self._running.port

    async def stop(self) -> None:
        """Stop at once: open streams are cut, as a crash or a deploy would cut them."""
        if self._running is not None:
            await self._running.stop(grace=0)
            self._running = None


@pytest.fixture
async def restartable(db_path: Path) -> AsyncIterator[RestartableServer]:
    server = RestartableServer(db_path)
    await server.start()
    yield server
    await server.stop()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say loudly when the PostgreSQL backend, the skills corpus, the browser or the C extension went untested
    (CI sets SKILLSTATE_REQUIRE_POSTGRES, SKILLSTATE_REQUIRE_CORPUS, SKILLSTATE_REQUIRE_BROWSER and
    SKILLSTATE_REQUIRE_EXTENSIONS, which fail those tests instead)."""
    untested = {
        "PostgreSQL tests SKIPPED": "export SKILLSTATE_TEST_POSTGRES=$(scripts/postgres_for_tests.sh)",
        "skills corpus tests SKIPPED": "put the corpus in ../shared/skills-corpus or set SKILLSTATE_SKILLS_CORPUS",
        "browser tests SKIPPED": "apt-get install chromium",
        "C extension tests SKIPPED": "apt-get install gcc python3-dev, then pip install -e . again",
    }
    for reason, fix in untested.items():
        skipped = [r for r in terminalreporter.stats.get("skipped", []) if reason in str(r.longrepr)]
        if skipped:
            terminalreporter.write_sep("!", f"{len(skipped)} {reason}: {fix}")
