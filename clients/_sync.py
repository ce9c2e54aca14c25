"""A blocking wrapper around StateClient, for scripts and notebooks that do not run an event loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from ._channel import ClientTLS
from ._client import StateClient
from ._retry import RetryPolicy
from ._session import Session
from ._types import (
    JSON,
    CreatedExecution,
    ExecutionPage,
    ExecutionSummary,
    HistoryPage,
    Observation,
    PatchResult,
    RevisionEvent,
    Snapshot,
    State,
    StateJSON,
)

T = TypeVar("T")


class SyncStateClient:
    """StateClient's methods, blocking; its streams become plain iterators.

    It runs its own event loop, so it must not be called from inside a running one.
    """

    def __init__(
        self,
        target: str = "127.0.0.1:50051",
        *,
        token: str | None = None,
        tls: ClientTLS | None = None,
        retry: RetryPolicy = RetryPolicy(),
        timeout: float | None = 30.0,
        follow_owners: bool = False,
    ) -> None:
        self._runner = asyncio.Runner()
        self._client = self._run(self._connect(target, token, tls, retry, timeout, follow_owners))

    @staticmethod
    async def _connect(
        target: str,
        token: str | None,
        tls: ClientTLS | None,
        retry: RetryPolicy,
        timeout: float | None,
        follow_owners: bool,
    ) -> StateClient:
        # made on the running loop, which its channels bind to
        return StateClient(target, token=token, tls=tls, retry=retry, timeout=timeout, follow_owners=follow_owners)

    def __enter__(self) -> SyncStateClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._run(self._client.close())
        self._runner.close()

    def create_execution(
        self,
        execution_id: str = "",
        *,
        schema: Mapping[str, JSON] | None = None,
        initial_state: Mapping[str, JSON] | None = None,
    ) -> CreatedExecution:
        return self._run(self._client.create_execution(execution_id, schema=schema, initial_state=initial_state))

    def get_state(self, execution_id: str, at_revision: int | None = None) -> State:
        return self._run(self._client.get_state(execution_id, at_revision))

    def get_state_json(self, execution_id: str, at_revision: int | None = None) -> StateJSON:
        return self._run(self._client.get_state_json(execution_id, at_revision))

    def submit_patch(
        self,
        execution_id: str,
        patch: Mapping[str, JSON],
        *,
        agent_id: str,
        base_revision: int,
        action: JSON = None,
        client_patch_id: str | None = None,
    ) -> PatchResult:
        return self._run(
            self._client.submit_patch(
                execution_id,
                patch,
                agent_id=agent_id,
                base_revision=base_revision,
                action=action,
                client_patch_id=client_patch_id,
            )
        )

    def get_history(
        self,
        execution_id: str,
        from_revision: int = 1,
        to_revision: int = 0,
        *,
        page_size: int = 0,
        page_token: str = "",
    ) -> HistoryPage:
        return self._run(
            self._client.get_history(
                execution_id, from_revision, to_revision, page_size=page_size, page_token=page_token
            )
        )

    def history(
        self, execution_id: str, from_revision: int = 1, to_revision: int = 0, *, page_size: int = 0
    ) -> Iterator[RevisionEvent]:
        return self._iterate(self._client.history(execution_id, from_revision, to_revision, page_size=page_size))

    def watch(
        self, execution_id: str, from_revision: int = 0, *, resume: bool = True
    ) -> Iterator[RevisionEvent | Snapshot]:
        return self._iterate(self._client.watch(execution_id, from_revision, resume=resume))

    def list_executions(self, prefix: str = "", *, page_size: int = 0, page_token: str = "") -> ExecutionPage:
        return self._run(self._client.list_executions(prefix, page_size=page_size, page_token=page_token))

    def executions(self, prefix: str = "", *, page_size: int = 0) -> Iterator[ExecutionSummary]:
        return self._iterate(self._client.executions(prefix, page_size=page_size))

    def delete_execution(self, execution_id: str) -> int:
        return self._run(self._client.delete_execution(execution_id))

    def compact(self, execution_id: str, up_to_revision: int) -> int:
        return self._run(self._client.compact(execution_id, up_to_revision))

    def publish_observation(
        self, execution_id: str, to: str, payload: JSON, *, source: str = "", kind: str = ""
    ) -> int:
        return self._run(self._client.publish_observation(execution_id, to, payload, source=source, kind=kind))

    def observations(
        self,
        execution_id: str,
        agent_id: str,
        *,
        skills: Sequence[str] = (),
        after_sequence: int = 0,
        resume: bool = True,
    ) -> Iterator[Observation]:
        stream = self._client.observations(
            execution_id, agent_id, skills=skills, after_sequence=after_sequence, resume=resume
        )
        return self._iterate(stream)

    def session(
        self,
        execution_id: str,
        *,
        agent_id: str,
        skills: Sequence[str] = (),
        after_sequence: int = 0,
        group: str = "",
        ack_deadline: float | None = None,
        max_unacked: int = 0,
        from_revision: int | None = None,
        receive_observations: bool = True,
    ) -> SyncSession:
        """`StateClient.session`, blocking: `with client.session(execution_id, agent_id=...) as s:`."""
        session = self._client.session(
            execution_id,
            agent_id=agent_id,
            skills=skills,
            after_sequence=after_sequence,
            group=group,
            ack_deadline=ack_deadline,
            max_unacked=max_unacked,
            from_revision=from_revision,
            receive_observations=receive_observations,
        )
        return SyncSession(self, session)

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self._runner.run(coroutine)

    def _iterate(self, stream: AsyncIterator[T]) -> Iterator[T]:
        async def next_item() -> tuple[bool, T | None]:
            try:
                return True, await anext(stream)
            except StopAsyncIteration:
                return False, None

        try:
            while True:
                more, item = self._run(next_item())
                if not more:
                    return
                yield item  # type: ignore[misc]
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                self._run(aclose())


class SyncSession:
    """Session's methods, blocking; its streams become plain iterators. The stream is served only while a
    method runs (the client's event loop runs then), which a session's buffers absorb."""

    def __init__(self, client: SyncStateClient, session: Session) -> None:
        self._client, self._session = client, session

    @property
    def head_revision(self) -> int:
        return self._session.head_revision

    def __enter__(self) -> SyncSession:
        self._client._run(self._session.__aenter__())
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        self.close(cancel=kind is not None)

    def submit(
        self,
        patch: Mapping[str, JSON],
        *,
        base_revision: int,
        action: JSON = None,
        client_patch_id: str | None = None,
    ) -> PatchResult:
        submitted = self._session.submit(
            patch, base_revision=base_revision, action=action, client_patch_id=client_patch_id
        )
        return self._client._run(submitted)

    def ack(self, sequences: Sequence[int], *, requeue: bool = False) -> None:
        self._client._run(self._session.ack(sequences, requeue=requeue))

    def observations(self) -> Iterator[Observation]:
        return self._client._iterate(self._session.observations())

    def revisions(self) -> Iterator[RevisionEvent | Snapshot]:
        return self._client._iterate(self._session.revisions())

    def close(self, *, cancel: bool = False) -> None:
        self._client._run(self._session.close(cancel=cancel))
