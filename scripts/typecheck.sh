#!/usr/bin/env bash
# mypy cannot follow setuptools' editable-install finder, so give it the import namespace as a link tree.
set -euo pipefail
cd "$(dirname "$0")/.."
tree=build/typecheck/skillstate
rm -rf build/typecheck && mkdir -p "$tree"
for pair in server:server clients:clients agents:agents cli:cli state:proto/skillstate/state \
    skills:proto/skillstate/skills project_skills:skills mcp_server:mcp_server console:console; do
  ln -s "$PWD/${pair#*:}" "$tree/${pair%%:*}"
done
MYPYPATH=build/typecheck exec "${PYTHON:-python3}" -m mypy -p skillstate.server -p skillstate.clients -p skillstate.cli -p skillstate.agents -p skillstate.mcp_server -p skillstate.console "$@"
