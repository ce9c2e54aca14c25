"""TLS and mutual TLS between the real server and the real client (certificates made per test)."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillstate.clients import ClientTLS, RetryPolicy, StateClient, UnavailableError
from skillstate.server.rpc.app import ServerTLS, start_server
from skillstate.server.storage.revision_log.memory import MemoryRevisionLog

from ..certificates import make_certificates

ONCE = RetryPolicy(attempts=1)


async def test_a_tls_server_talks_to_tls_clients_only(tmp_path: Path) -> None:
    pem = make_certificates(tmp_path)
    running = await start_server(
        MemoryRevisionLog(), "127.0.0.1:0", tls=ServerTLS.from_files(pem["server"], pem["server_key"])
    )
    address = f"127.0.0.1:{running.port}"
    try:
        async with StateClient(address, tls=ClientTLS.from_files(pem["ca"]), retry=ONCE) as client:
            created = await client.create_execution("x", initial_state={"a": 1})
            assert (await client.get_state(created.execution_id)).state == {"a": 1}
        async with StateClient(address, retry=ONCE, timeout=2) as plaintext:
            with pytest.raises(UnavailableError):
                await plaintext.get_state("x")
        async with StateClient(address, tls=ClientTLS(), retry=ONCE, timeout=2) as untrusting:  # system roots only
            with pytest.raises(UnavailableError):
                await untrusting.get_state("x")
    finally:
        await running.stop(grace=0)


async def test_mutual_tls_requires_a_client_certificate(tmp_path: Path) -> None:
    pem = make_certificates(tmp_path)
    tls = ServerTLS.from_files(pem["server"], pem["server_key"], client_ca=pem["ca"])
    running = await start_server(MemoryRevisionLog(), "127.0.0.1:0", tls=tls)
    address = f"127.0.0.1:{running.port}"
    try:
        async with StateClient(address, tls=ClientTLS.from_files(pem["ca"]), retry=ONCE, timeout=2) as anonymous:
            with pytest.raises(UnavailableError):
                await anonymous.create_execution("x")
        with_certificate = ClientTLS.from_files(pem["ca"], pem["client"], pem["client_key"])
        async with StateClient(address, tls=with_certificate, retry=ONCE) as client:
            await client.create_execution("x")
            assert (await client.get_state("x")).revision == 0
    finally:
        await running.stop(grace=0)
