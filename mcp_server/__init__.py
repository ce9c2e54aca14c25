"""`skillstate mcp`: an MCP server that makes any MCP client an agent of a skillstate server, with the identity
and rights of the token it runs with (docs/mcp.md).

Tools (tools.py) are the calls an agent makes; resources (resources.py) are an execution's state and a skill,
and a subscription to a state (subscriptions.py) is fed by Watch; the prompt (prompts.py) is the SKILL.state
step. It imports only the client of ours (and the paper's prompt template), never the server.
"""

from .app import build_server
from .main import run_mcp

__all__ = ["build_server", "run_mcp"]
