"""Where a client that follows owners sends each call (clients/_owners.py): to the owner a redirect named,
through its own target (forwarded) while that owner cannot be reached, and never in a loop."""

from __future__ import annotations

from typing import Any

import grpc

from skillstate.clients import UnavailableError
from skillstate.clients._owners import ROUTE_METADATA, Owners

TARGET = object()
"""The stub of the client's own target."""


def not_owner(address: str) -> UnavailableError:
    return UnavailableError("owned elsewhere", reason="NOT_OWNER", metadata={"owner_address": address})


async def test_a_redirect_is_followed_and_an_owner_that_cannot_be_reached_is_gone_round_through_the_target() -> None:
    opened: dict[str, Any] = {}

    def open_stub(address: str) -> tuple[Any, grpc.aio.Channel]:
        opened[address] = object()
        return opened[address], grpc.aio.insecure_channel(address)  # never used: never connects

    owners = Owners(TARGET, open_stub)
    try:
        assert owners.route("x") == (TARGET, ROUTE_METADATA)
        assert owners.learn("x", not_owner("owner:1"), TARGET)  # call the owner now
        assert owners.route("x") == (opened["owner:1"], ROUTE_METADATA)
        refused = UnavailableError("failed to connect to all addresses")
        assert owners.learn("x", refused, opened["owner:1"])  # never sent: again at once, through the target
        assert owners.route("x") == (TARGET, None)  # forwarded there, without asking to be redirected
        assert owners.route("y") == (TARGET, ROUTE_METADATA)
        assert owners.learn("y", not_owner("owner:1"), TARGET)  # named, but failed lately: through the target
        assert owners.route("y") == (TARGET, None)
        lost = UnavailableError("the connection was reset")
        assert owners.learn("z", not_owner("owner:2"), TARGET)
        owner_2, _ = owners.route("z")
        assert not owners.learn("z", lost, owner_2)  # may have been done: the retry policy decides
        assert owners.route("z") == (TARGET, None)
        assert not owners.learn("w", UnavailableError("the target is down"), TARGET)  # nothing named
    finally:
        await owners.close()


async def test_a_replica_naming_itself_as_owner_is_not_called_again_at_once() -> None:
    stubs: dict[str, Any] = {}

    def open_stub(address: str) -> tuple[Any, grpc.aio.Channel]:
        stubs[address] = object()
        return stubs[address], grpc.aio.insecure_channel(address)

    owners = Owners(TARGET, open_stub)
    try:
        assert owners.learn("x", not_owner("owner:1"), TARGET)
        stub, _ = owners.route("x")
        assert owners.learn("x", not_owner("owner:1"), stub)  # restarted, it holds its old lease for a while
        assert owners.route("x") == (TARGET, None)
    finally:
        await owners.close()
