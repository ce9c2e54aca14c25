"""The MCP server of a skillstate server: its tools, resources, subscriptions and prompt, on one state client
and one registry client whose token decides what it may do."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from mcp.server.caching import CacheHint
from mcp.server.mcpserver import MCPServer

from skillstate.clients import SkillRegistryClient, StateClient

from .prompts import register_prompts
from .resources import register_resources
from .subscriptions import Feeds, serve_subscriptions
from .tools import register_tools

INSTRUCTIONS = """\
skillstate holds the shared state of executions that several agents work on at once, and a library of \
skills. Work in steps: read the state (get_state, or the resource skillstate://executions/{id}/state), \
decide, and write your change as a JSON merge patch with submit_patch against the revision you read. The \
server merges concurrent patches under per-path policies; an answer with status "conflict" means read again \
and redo the step. Wait for what happens next with next_observations. hydrate_skill gives the part of a \
skill a task needs; the prompt skill_state_step puts one step together the SKILL.state way."""


def _version() -> str:
    try:
        return version("skillstate")
    except PackageNotFoundError:
        return "unknown"


def build_server(state: StateClient, registry: SkillRegistryClient, feeds: Feeds) -> MCPServer:
    """The MCP server; `feeds` runs the Watch streams of its subscriptions (the caller closes it)."""
    server: MCPServer = MCPServer(
        "skillstate",
        title="skillstate",
        instructions=INSTRUCTIONS,
        version=_version(),
        log_level="WARNING",
        subscriptions=False,  # subscriptions/listen is served by subscriptions.py, fed by Watch
        cache_hints={"resources/read": CacheHint(ttl_ms=0, scope="private")},  # a state is stale once read
    )
    register_tools(server, state, registry)
    register_resources(server, state, registry)
    register_prompts(server, state, registry)
    serve_subscriptions(server, feeds)
    return server
