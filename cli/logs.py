"""Logging for the long-running commands (serve, mcp, console): text for people, or one JSON object a line
for a log collector (`--log-format json`)."""

from __future__ import annotations

import argparse
import json
import logging
from datetime import UTC, datetime

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def logging_options() -> argparse.ArgumentParser:
    """The parent parser of a command that logs: --log-level and --log-format."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--log-level", default="INFO", type=str.upper, choices=LOG_LEVELS, metavar="LEVEL",
        help=f"logging level: {', '.join(LOG_LEVELS)} (default: %(default)s)",
    )  # fmt: skip
    options.add_argument(
        "--log-format", default="text", choices=LOG_FORMATS,
        help="text, or json: one object a line with time, level, logger and message (default: %(default)s)",
    )  # fmt: skip
    return options


class JsonFormatter(logging.Formatter):
    """A record as one JSON line: `time` (UTC, RFC 3339 with milliseconds), `level`, `logger`, `message`, and
    `exception` when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(level: str, log_format: str) -> None:
    """Log to standard error (standard output may be a protocol, as `mcp --transport stdio`'s is)."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level, handlers=[handler], force=True)
