#!/usr/bin/env bash
# Start Debian's PostgreSQL for the tests, installing it first if it is missing, and print the URL of a
# test database (role and database `skillstate`/`skillstate_test`, made if missing). Needs root, as CI has.
#   export SKILLSTATE_TEST_POSTGRES=$(scripts/postgres_for_tests.sh)
set -euo pipefail
if ! command -v pg_ctlcluster >/dev/null; then
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
fi
if [ -z "$(pg_lsclusters -h)" ]; then
  pg_createcluster "$(ls /usr/lib/postgresql | sort -V | tail -1)" main >&2
fi
read -r version cluster port status _ < <(pg_lsclusters -h | head -1)
if [ "$status" != "online" ]; then
  pg_ctlcluster "$version" "$cluster" start >&2
fi
as_postgres() { su postgres -c "psql -p $port -tAc \"$1\""; }
[ "$(as_postgres "SELECT 1 FROM pg_roles WHERE rolname = 'skillstate'")" = 1 ] ||
  as_postgres "CREATE ROLE skillstate LOGIN PASSWORD 'skillstate'" >&2
[ "$(as_postgres "SELECT 1 FROM pg_database WHERE datname = 'skillstate_test'")" = 1 ] ||
  su postgres -c "createdb -p $port -O skillstate skillstate_test" >&2
echo "postgresql://skillstate:skillstate@127.0.0.1:$port/skillstate_test"
