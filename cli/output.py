"""How read commands print what they get: `-o json` (one object a line, the default, for scripts), `-o yaml`
(one document each) or `-o table` (aligned columns for people, as `etcdctl -w table` and `kubectl -o wide`)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Sequence
from dataclasses import asdict, is_dataclass
from typing import Any, TextIO

FORMATS = ("json", "table", "yaml")
CELL_WIDTH = 60
"""A table cell longer than this is cut, ending in '…' (-o json or yaml shows every value whole)."""


def output_options(default: str | None = "json") -> argparse.ArgumentParser:
    """The parent parser of a read command: -o/--output."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "-o", "--output", choices=FORMATS, default=default,
        help="json (a line each), yaml or table" + (f" (default: {default})" if default else ""),
    )  # fmt: skip
    return options


def plain(value: Any) -> Any:
    """A result as JSON-ready values: dataclasses as dicts, bytes as UTF-8 text."""
    if is_dataclass(value) and not isinstance(value, type):
        value = asdict(value)
    return json.loads(json.dumps(value, ensure_ascii=False, default=_encode))


def _encode(value: object) -> object:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class Printer:
    """Prints results in one format. A table of a listing is aligned over its rows, so `rows` waits for them
    all; `stream` prints each row as it comes, aligned to the header (for watches that never end)."""

    def __init__(self, output: str, out: TextIO | None = None) -> None:
        self.output = output
        self.out = out or sys.stdout

    def one(self, value: Any) -> None:
        """One result: a JSON line, a YAML document, or a two-column table of its fields."""
        fields = plain(value)
        if self.output == "table" and isinstance(fields, dict):
            self._write(_table(["FIELD", "VALUE"], [[key, fields[key]] for key in sorted(fields)]))
        else:
            self._each(fields)

    async def rows(self, values: AsyncIterable[Any] | Iterable[Any], columns: Sequence[str]) -> None:
        """A listing: each printed as it comes, or in a table (the given columns of each, aligned once all have
        come; an empty listing prints just the header)."""
        table = []
        async for value in _each_of(values):
            fields = plain(value)
            if self.output == "table":
                table.append([fields.get(c) for c in columns])
            else:
                self._each(fields)
        if self.output == "table":
            self._write(_table([c.upper() for c in columns], table))

    def stream(self, value: Any, columns: Sequence[str], first: bool) -> None:
        """One row of a listing that is printed as it arrives."""
        fields = plain(value)
        if self.output != "table":
            self._each(fields)
            return
        widths = [max(len(c), 12) for c in columns]
        lines = [_line([c.upper() for c in columns], widths)] if first else []
        self._write([*lines, _line([_cell(fields.get(c)) for c in columns], widths)])

    def _each(self, fields: Any) -> None:
        if self.output == "yaml":
            import yaml

            text = yaml.safe_dump(fields, sort_keys=True, allow_unicode=True, explicit_start=True)
            self.out.write(text)
            self.out.flush()
        else:
            print(json.dumps(fields, ensure_ascii=False, sort_keys=True), file=self.out, flush=True)

    def _write(self, lines: list[str]) -> None:
        self.out.write("".join(line.rstrip() + "\n" for line in lines))
        self.out.flush()


async def _each_of(values: AsyncIterable[Any] | Iterable[Any]) -> AsyncIterator[Any]:
    if isinstance(values, AsyncIterable):
        async for value in values:
            yield value
    else:
        for value in values:
            yield value


def _cell(value: Any) -> str:
    """A value as one line of text: strings as they are, nothing for none, the rest as compact JSON."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    text = text.replace("\n", " ")
    return text if len(text) <= CELL_WIDTH else text[: CELL_WIDTH - 1] + "…"


def _line(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True))


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    cells = [header] + [[_cell(value) for value in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return [_line(row, widths) for row in cells]
