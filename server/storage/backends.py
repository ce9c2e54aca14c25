"""Where a server keeps everything, chosen by one `--db` value: `:memory:`, a SQLite file path, or a
PostgreSQL URL (`postgresql://user:password@host:port/database`). The revision log, the skill library and
the credentials always live in the same place."""

from __future__ import annotations

from pathlib import Path

from .credential_store.base import CredentialStore
from .credential_store.memory import MemoryCredentialStore
from .credential_store.sqlite import SqliteCredentialStore
from .revision_log.base import RevisionLog
from .revision_log.memory import MemoryRevisionLog
from .revision_log.sqlite import SqliteRevisionLog
from .skill_store.base import SkillStore
from .skill_store.memory import MemorySkillStore
from .skill_store.sqlite import SqliteSkillStore
from .sqlite_writer import INLINE_BUDGET

MEMORY = ":memory:"


def is_postgres_url(db: str) -> bool:
    return db.startswith(("postgresql://", "postgres://"))


def open_log(db: str, max_bytes: int | None = None, inline_budget: float = INLINE_BUDGET) -> RevisionLog:
    """The revision log; `max_bytes` caps a SQLite file (PostgreSQL is sized by its own administrator), and
    `inline_budget` is how long one of its group commits may hold the event loop (sqlite_writer.py)."""
    if db == MEMORY:
        return MemoryRevisionLog()
    if is_postgres_url(db):
        from .revision_log.postgres import PostgresRevisionLog

        return PostgresRevisionLog(db)
    return SqliteRevisionLog(Path(db), max_bytes, inline_budget)


def open_skill_store(db: str) -> SkillStore:
    if db == MEMORY:
        return MemorySkillStore()
    if is_postgres_url(db):
        from .skill_store.postgres import PostgresSkillStore

        return PostgresSkillStore(db)
    return SqliteSkillStore(Path(db))


def open_credential_store(db: str) -> CredentialStore:
    if db == MEMORY:
        return MemoryCredentialStore()
    if is_postgres_url(db):
        from .credential_store.postgres import PostgresCredentialStore

        return PostgresCredentialStore(db)
    return SqliteCredentialStore(Path(db))
