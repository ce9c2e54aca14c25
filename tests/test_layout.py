"""Architecture rules: the contract and the client depend on nothing of ours; the server never loads litellm."""

from __future__ import annotations

import json
import subprocess
import sys


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
    modules = loaded_modules("import skillstate.server.app, skillstate.cli.main")
    assert "litellm" not in modules


def test_the_engines_do_not_import_grpc() -> None:
    modules = loaded_modules("import skillstate.server.engine, skillstate.server.skills.registry")
    assert not any(m == "grpc" or m.startswith("grpc.") for m in modules)


def test_agents_are_clients_of_the_server_and_load_litellm_only_to_call_a_model() -> None:
    modules = loaded_modules("import skillstate.agents.sim, skillstate.agents.results, skillstate.agents.runtime")
    ours = {m for m in modules if m.startswith("skillstate.")}
    assert ours == {m for m in ours if m.startswith(("skillstate.agents", "skillstate.clients", *STUB_PACKAGES))}
    assert "litellm" not in modules
