"""The channel to a skillstate server: TLS, the bearer token on every call, and gRPC's channel options."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

_CHANNEL_OPTIONS = [
    # gRPC waits 1 s and more before reconnecting by default, longer than a retry policy should need to
    # notice that a restarted server is back
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
    # keepalive within the server's policy (server/rpc/app.py KEEPALIVE_OPTIONS: pings at most every 10 s
    # while it sends nothing, else GOAWAY "too_many_pings"): a dead server or a half-open connection under an
    # open stream is noticed within 30 + 10 s instead of never
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 0),  # an idle channel sends nothing: the server pings it
    ("grpc.http2.max_pings_without_data", 0),  # a watch sends no data after its request: keep pinging
]


@dataclass(frozen=True, slots=True)
class ClientTLS:
    """TLS for the channel: the CA that signed the server's certificate (None: the system's roots), and for
    mutual TLS this client's own certificate chain and key. All PEM."""

    root_certificates: bytes | None = None
    certificate_chain: bytes | None = None
    private_key: bytes | None = None

    @classmethod
    def from_files(
        cls, ca: str | Path | None = None, cert: str | Path | None = None, key: str | Path | None = None
    ) -> ClientTLS:
        def read(path: str | Path | None) -> bytes | None:
            return Path(path).read_bytes() if path else None

        return cls(read(ca), read(cert), read(key))


def _with_metadata(details: Any, header: tuple[str, str]) -> Any:
    return details._replace(metadata=(*(details.metadata or ()), header))


class _TokenOnUnaryCalls(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    def __init__(self, header: tuple[str, str]) -> None:
        self._header = header

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(_with_metadata(details, self._header), request)


class _TokenOnStreams(grpc.aio.UnaryStreamClientInterceptor):  # type: ignore[misc]
    def __init__(self, header: tuple[str, str]) -> None:
        self._header = header

    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(_with_metadata(details, self._header), request)


class _TokenOnSessions(grpc.aio.StreamStreamClientInterceptor):  # type: ignore[misc]
    def __init__(self, header: tuple[str, str]) -> None:
        self._header = header

    async def intercept_stream_stream(self, continuation: Any, details: Any, requests: Any) -> Any:
        return await continuation(_with_metadata(details, self._header), requests)


def open_channel(
    target: str,
    *,
    token: str | None = None,
    tls: ClientTLS | None = None,
    options: Sequence[tuple[str, Any]] = (),
) -> grpc.aio.Channel:
    """A channel to a skillstate server, with a bearer token on every call and TLS if given; clients of
    several services may share it (`StateClient(channel=...)`). `options` are gRPC channel options that
    replace the defaults of the same name (keepalive: docs/limits.md; pinging more often than every 10 s
    gets the connection closed by the server)."""
    header = ("authorization", f"Bearer {token}")
    interceptors = [_TokenOnUnaryCalls(header), _TokenOnStreams(header), _TokenOnSessions(header)] if token else None
    channel_options = list({**dict(_CHANNEL_OPTIONS), **dict(options)}.items())
    if tls is None:
        return grpc.aio.insecure_channel(target, options=channel_options, interceptors=interceptors)
    credentials = grpc.ssl_channel_credentials(tls.root_certificates, tls.private_key, tls.certificate_chain)
    return grpc.aio.secure_channel(target, credentials, options=channel_options, interceptors=interceptors)
