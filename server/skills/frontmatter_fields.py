"""The front matter's fields checked against the format, a reader each: what a field holds, with every
deviation reported (an error when loading is strict, else a warning)."""

from __future__ import annotations

import unicodedata
from typing import Any

from .diagnostics import LoadReport

MAX_NAME_LENGTH = 64
MAX_DESCRIPTION_LENGTH = 1024
MAX_COMPATIBILITY_LENGTH = 500
KNOWN_KEYS = frozenset({"name", "description", "license", "compatibility", "metadata", "allowed-tools"})


def check_keys(front: dict[str, Any], report: LoadReport) -> None:
    unknown = sorted(front.keys() - KNOWN_KEYS)
    if unknown:
        report.deviation(
            "front-matter.keys", f"unknown keys {', '.join(unknown)} (known: {', '.join(sorted(KNOWN_KEYS))})"
        )


def read_description(front: dict[str, Any], report: LoadReport) -> str:
    value = front.get("description")
    if not isinstance(value, str) or not value.strip():
        report.error("description.required", "a non-empty description is required")
        return ""
    if len(value) > MAX_DESCRIPTION_LENGTH:
        report.deviation("description.length", f"{len(value)} characters, more than {MAX_DESCRIPTION_LENGTH}")
    return value.strip()


def read_name(front: dict[str, Any], folder_name: str, report: LoadReport) -> str:
    value = front.get("name")
    if not isinstance(value, str) or not value.strip():
        report.deviation("name.required", f"a non-empty name is required (using the folder name {folder_name!r})")
        return folder_name
    name = unicodedata.normalize("NFKC", value.strip())
    if len(name) > MAX_NAME_LENGTH:
        report.deviation("name.length", f"{name!r} has {len(name)} characters, more than {MAX_NAME_LENGTH}")
    if name != name.lower():
        report.deviation("name.lowercase", f"{name!r} must be lowercase")
    if name.startswith("-") or name.endswith("-"):
        report.deviation("name.hyphens", f"{name!r} must not start or end with '-'")
    if "--" in name:
        report.deviation("name.hyphens", f"{name!r} must not contain '--'")
    if not all(c.isalnum() or c == "-" for c in name):
        report.deviation("name.characters", f"{name!r} may hold only letters, digits and '-'")
    if unicodedata.normalize("NFKC", folder_name) != name:
        report.deviation("name.folder", f"{name!r} differs from its folder name {folder_name!r}")
    return name


def read_compatibility(front: dict[str, Any], report: LoadReport) -> str | None:
    value = front.get("compatibility")
    if value is None:
        return None
    if not isinstance(value, str):
        report.deviation("compatibility.type", "must be a string")
        return None
    if len(value) > MAX_COMPATIBILITY_LENGTH:
        report.deviation("compatibility.length", f"{len(value)} characters, more than {MAX_COMPATIBILITY_LENGTH}")
    return value


def read_metadata(front: dict[str, Any], report: LoadReport) -> dict[str, str]:
    value = front.get("metadata")
    if value is None:
        return {}
    if not isinstance(value, dict):
        report.deviation("metadata.type", "must be a mapping of strings to strings")
        return {}
    return {str(k): v if isinstance(v, str) else str(v) for k, v in value.items()}


def read_allowed_tools(front: dict[str, Any], report: LoadReport) -> tuple[str, ...]:
    value = front.get("allowed-tools")
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    report.deviation("allowed-tools.type", "must be a string or a list of strings")
    return ()


def read_license(front: dict[str, Any], report: LoadReport) -> str | None:
    value = front.get("license")
    if value is None:
        return None
    if not isinstance(value, str):
        report.deviation("license.type", "must be a string")
        return None
    return value
