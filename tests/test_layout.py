"""Architecture rules: the contract and the client depend on nothing of ours; the server never loads litellm."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

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


def test_agents_are_clients_of_the_server_and_load_litellm_only_to_call_a_model() -> None:
    modules = loaded_modules("import skillstate.agents.sim, skillstate.agents.results, skillstate.agents.runtime")
    ours = {m for m in modules if m.startswith("skillstate.")}
    allowed = ("skillstate.agents", "skillstate.clients", "skillstate.project_skills", *STUB_PACKAGES)
    assert ours == {m for m in ours if m.startswith(allowed)}
    assert "litellm" not in modules


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
