from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from skillstate.server.storage.revision_log.base import RevisionLog
from skillstate.server.storage.revision_log.memory import MemoryRevisionLog

from .contract import RevisionLogContract


class TestMemoryRevisionLog(RevisionLogContract):
    @pytest.fixture
    async def log(self) -> AsyncIterator[RevisionLog]:
        backend = MemoryRevisionLog()
        await backend.open()
        yield backend
        await backend.close()
