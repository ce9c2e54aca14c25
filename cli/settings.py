"""Settings for `skillstate serve` from the environment and a TOML file, beneath its flags.

A flag given on the command line wins over `SKILLSTATE_<FLAG>` in the environment (`--max-in-flight` is
`SKILLSTATE_MAX_IN_FLIGHT`), which wins over the key of the same name in the `--config` file (`max-in-flight =
2048`). Values are checked as the flag's own would be, and an error names where the value came from.
"""

from __future__ import annotations

import argparse
import tomllib
from collections.abc import Mapping
from typing import Any

from .common import UsageError

ENV_PREFIX = "SKILLSTATE_"
TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
NOT_SETTINGS = ("help", "config")
"""Options that are not settings: --help, and --config itself (which may come from SKILLSTATE_CONFIG)."""


def settings(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """The parser's options that a setting may give, by their flag's name without the dashes."""
    return {
        action.option_strings[-1].removeprefix("--"): action
        for action in parser._actions
        if action.option_strings and action.dest not in NOT_SETTINGS
    }


def env_name(key: str) -> str:
    return ENV_PREFIX + key.upper().replace("-", "_")


def layered_defaults(
    parser: argparse.ArgumentParser, environ: Mapping[str, str], config_path: str | None
) -> dict[str, Any]:
    """The values the environment and the config file give the parser's options, by dest: set them as its
    defaults and parse the command line again, so that a flag given there wins."""
    options = settings(parser)
    values: dict[str, Any] = {}
    if config_path:
        for key, raw in _read_toml(config_path).items():
            action = options.get(key)
            if action is None:
                known = ", ".join(sorted(options))
                raise UsageError(f"{config_path}: unknown setting {key!r} (settings are the flags' names: {known})")
            values[action.dest] = _from_toml(action, raw, f"{config_path}: {key}")
    for key, action in options.items():
        name = env_name(key)
        if name in environ:
            values[action.dest] = _from_text(action, environ[name], name)
    return values


def _read_toml(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise UsageError(f"--config: cannot read {path}: {e.strerror}") from e
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"--config: {path} is not valid TOML: {e}") from e


def _from_toml(action: argparse.Action, value: object, where: str) -> object:
    if isinstance(action, argparse._StoreTrueAction):
        if not isinstance(value, bool):
            raise UsageError(f"{where}: expected true or false, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise UsageError(f"{where}: expected a string or a number, got {value!r}")
    return _from_text(action, str(value), where)


def _from_text(action: argparse.Action, text: str, where: str) -> object:
    """The value as the flag would take it: its type applied and its choices checked."""
    if isinstance(action, argparse._StoreTrueAction):
        if text.lower() not in TRUE + FALSE:
            raise UsageError(f"{where}: expected one of {', '.join(TRUE + FALSE)}, got {text!r}")
        return text.lower() in TRUE
    convert = action.type if callable(action.type) else str
    try:
        value = convert(text)
    except (TypeError, ValueError):
        raise UsageError(f"{where}: invalid {getattr(convert, '__name__', 'value')} value: {text!r}") from None
    if action.choices is not None and value not in action.choices:
        raise UsageError(f"{where}: {text!r} is not one of {', '.join(map(str, action.choices))}")
    return value
