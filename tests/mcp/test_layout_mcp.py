"""The MCP server is a client of the skillstate server: it imports the SDK (and the paper's prompt template),
never the server, and runs on the base install plus the `mcp` extra."""

from __future__ import annotations

import subprocess
import sys

from ..test_layout import STUB_PACKAGES, loaded_modules

EXTRAS_IT_NEEDS_NOT = ["litellm", "scipy", "matplotlib", "asyncpg", "prometheus_client"]


def test_the_mcp_server_imports_the_client_and_not_the_server() -> None:
    modules = loaded_modules("import skillstate.mcp_server.main")
    ours = {m for m in modules if m.startswith("skillstate.")}
    assert {"skillstate.mcp_server.tools", "skillstate.clients", "skillstate.agents.protocol.prompts"} <= ours
    assert not any(m.startswith("skillstate.server") for m in ours)
    # skillstate.agents.protocol.prompts comes with its package (agents/__init__.py imports the runtime)
    allowed = ("skillstate.mcp_server", "skillstate.clients", "skillstate.agents", "skillstate.project_skills")
    assert ours == {m for m in ours if m.startswith((*allowed, *STUB_PACKAGES))}
    assert not {"litellm", "scipy", "matplotlib"} & modules


def test_it_builds_without_the_other_extras() -> None:
    """A module made unimportable (None in sys.modules) is as good as uninstalled."""
    program = f"""
import sys
for name in {EXTRAS_IT_NEEDS_NOT!r}:
    sys.modules[name] = None
from skillstate.clients import SkillRegistryClient, StateClient
from skillstate.mcp_server.app import build_server
from skillstate.mcp_server.subscriptions import Feeds
state = StateClient("127.0.0.1:1")
server = build_server(state, SkillRegistryClient("127.0.0.1:1"), Feeds(state))
print(server.name)
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "skillstate"
