"""Architecture rules: the contract and the client depend on nothing of ours; the server's rooms are layered
(rpc, then auth, skills and engine, then storage, then the foundation: errors, limits, metrics), and so are
the agents' (reports, sims, teams, runtime, scripted, then protocol and envs), with no import cycles anywhere;
the server never loads litellm."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from .imports import cycles, import_graph

ROOT = Path(__file__).resolve().parents[1]


def loaded_modules(statement: str) -> set[str]:
    code = f"import json, sys; {statement}; print(json.dumps(sorted(sys.modules)))"
    output = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return set(json.loads(output))


STUB_PACKAGES = ("skillstate.state", "skillstate.skills")
"""The generated code of proto/: the contract."""


def test_the_client_imports_only_the_generated_stubs() -> None:
    ours = {m for m in loaded_modules("import skillstate.clients") if m.startswith("skillstate.")}
    assert ours == {m for m in ours if m.startswith(("skillstate.clients", *STUB_PACKAGES))}
    assert {"skillstate.state.v1.state_pb2", "skillstate.skills.v1.skills_pb2"} <= ours


def test_the_stubs_import_nothing_of_ours() -> None:
    for package, module in (("skillstate.state", "state_pb2_grpc"), ("skillstate.skills", "skills_pb2_grpc")):
        ours = {m for m in loaded_modules(f"import {package}.v1.{module}") if m.startswith("skillstate.")}
        assert ours and all(m.startswith(package) for m in ours)


def test_the_server_does_not_import_litellm() -> None:
    modules = loaded_modules("import skillstate.server.rpc.app, skillstate.cli.main")
    assert "litellm" not in modules


def test_the_engines_do_not_import_grpc() -> None:
    modules = loaded_modules("import skillstate.server.engine.state_engine, skillstate.server.skills.registry")
    assert not any(m == "grpc" or m.startswith("grpc.") for m in modules)


GRAPH = import_graph()
SERVER = "skillstate.server"
FOUNDATION = {f"{SERVER}.errors", f"{SERVER}.limits", f"{SERVER}.metrics", SERVER}
FORBIDDEN = {
    "engine": ("grpc", "grpc_health", "grpc_reflection", f"{SERVER}.rpc", f"{SERVER}.auth", f"{SERVER}.skills"),
    "skills": ("grpc", "grpc_health", "grpc_reflection", f"{SERVER}.rpc", f"{SERVER}.auth", f"{SERVER}.engine"),
    "auth": ("grpc", f"{SERVER}.rpc", f"{SERVER}.engine", f"{SERVER}.skills"),
    "storage": (f"{SERVER}.engine", f"{SERVER}.skills", f"{SERVER}.auth", f"{SERVER}.rpc"),
}
"""What each room below rpc must not import (a name covers the package and everything in it)."""


@pytest.mark.parametrize("room", sorted(FORBIDDEN))
def test_each_room_imports_only_the_rooms_below_it(room: str) -> None:
    members = {m: imported for m, imported in GRAPH.items() if m.startswith(f"{SERVER}.{room}")}
    assert members, f"no modules found in server/{room}"
    wrong = sorted(
        f"{m} imports {name}"
        for m, imported in members.items()
        for name in imported
        if any(name == f or name.startswith(f + ".") for f in FORBIDDEN[room])
    )
    assert wrong == []


def test_the_foundation_imports_nothing_of_ours_but_itself() -> None:
    for module in FOUNDATION & GRAPH.keys():
        assert {m for m in GRAPH[module] if m.startswith("skillstate.")} <= FOUNDATION


def test_nothing_in_the_server_imports_rpc_but_rpc() -> None:
    importers = {m for m, imported in GRAPH.items() if any(i.startswith(f"{SERVER}.rpc") for i in imported)}
    assert {m for m in importers if m.startswith(SERVER)} <= {m for m in GRAPH if m.startswith(f"{SERVER}.rpc")}


def test_there_are_no_import_cycles() -> None:
    assert cycles(GRAPH) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    """The check above can fail: a planted circle through three modules is found, and a chain is not."""
    planted = {"a": {"b"}, "b": {"c"}, "c": {"a", "grpc"}, "d": {"a"}}
    assert cycles(planted) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_agents_are_clients_of_the_server_and_load_litellm_only_to_call_a_model() -> None:
    modules = loaded_modules(
        "import skillstate.agents.sims.sequential, skillstate.agents.reports.results, skillstate.agents.runtime.agent"
    )
    ours = {m for m in modules if m.startswith("skillstate.")}
    allowed = ("skillstate.agents", "skillstate.clients", "skillstate.project_skills", *STUB_PACKAGES)
    assert ours == {m for m in ours if m.startswith(allowed)}
    assert "litellm" not in modules


AGENTS = "skillstate.agents"
AGENT_ROOMS = {
    "protocol": set(),
    "envs": set(),
    "scripted": {"protocol", "envs"},
    "runtime": {"protocol", "scripted"},
    "teams": {"runtime", "protocol"},
    "work": {"runtime", "protocol"},
    "sims": {"teams", "runtime", "scripted", "protocol", "envs"},
    "reports": {"sims", "runtime"},
}
"""Each room of agents/ and the rooms it may import: a room reaches only those below it."""


def _agent_room(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 3 and parts[:2] == AGENTS.split(".") else None


@pytest.mark.parametrize("room", sorted(AGENT_ROOMS))
def test_each_agents_room_imports_only_the_rooms_below_it(room: str) -> None:
    members = {m: imported for m, imported in GRAPH.items() if _agent_room(m) == room}
    assert members, f"no modules found in agents/{room}"
    wrong = sorted(
        f"{m} imports {name}"
        for m, imported in members.items()
        for name in imported
        if name.startswith(f"{AGENTS}.") and _agent_room(name) not in {room, *AGENT_ROOMS[room]}
    )
    assert wrong == []


def test_every_agents_module_is_in_a_room_that_says_what_it_holds() -> None:
    top = ROOT / "agents"
    assert [p.name for p in top.glob("*.py")] == ["__init__.py"]
    rooms = {p.parent.name for p in top.glob("*/__init__.py")}
    assert rooms == set(AGENT_ROOMS)
    for room in rooms:
        opening = (top / room / "__init__.py").read_text().strip()
        assert opening.startswith('"""') and opening.endswith('"""') and "\n" not in opening, room


def test_the_wheel_ships_every_file_of_the_project_skills(tmp_path: Path) -> None:
    """`skillstate demo` registers these packages: an install from the wheel must carry them whole."""
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".*", "build", "dist", "*.egg-info", "__pycache__"))
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"]
    subprocess.run([*pip_wheel, "-w", str(tmp_path), str(source)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("skillstate-*.whl")
    shipped = {name.removeprefix("skillstate/project_skills/") for name in zipfile.ZipFile(wheel).namelist()}
    skills = ROOT / "skills"
    expected = {
        p.relative_to(skills).as_posix() for p in skills.glob("*/**/*") if p.is_file() and "__pycache__" not in p.parts
    }
    assert expected and expected <= shipped


def test_a_server_on_sqlite_loads_neither_postgres_nor_prometheus() -> None:
    """Both load only when asked for (`--db postgresql://`, `--metrics-listen`): startup stays quick."""
    modules = loaded_modules(
        "import skillstate.server.rpc.app, skillstate.server.storage.backends, skillstate.cli.main"
    )
    assert "asyncpg" not in modules and "prometheus_client" not in modules
