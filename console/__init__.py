"""The web console of a skillstate server: read-only pages of its executions (the list, each one's state,
revisions and observations, live) and its skill library (section graphs, hydration). docs/console.md.

The pages (static/) read a JSON API and server-sent events (api.py, events.py) that the console answers by
calling the server through the SDK with its own token, so a visitor sees what that token may read. It
imports only the client of ours, never the server.
"""

from .app import create_app
from .context import Console
from .main import RunningConsole, run_console, serve_console, start_console
from .upstream import Upstream

__all__ = ["Console", "RunningConsole", "Upstream", "create_app", "run_console", "serve_console", "start_console"]
