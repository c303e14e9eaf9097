#!/usr/bin/env bash
# install-postgres.sh installs the PostgreSQL 15 server binaries (initdb,
# pg_ctl, postgres) that the tests start as a throwaway server. It is
# idempotent: when initdb is already there it does nothing, and it runs
# apt-get update only when the package is not known to apt yet.
set -euo pipefail

pg_bin=/usr/lib/postgresql/15/bin

if [[ -x "$pg_bin/initdb" && -x "$pg_bin/pg_ctl" ]] || command -v initdb >/dev/null 2>&1; then
	echo "install-postgres: PostgreSQL server binaries already installed"
	exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
	echo "install-postgres: apt-get not found; install the PostgreSQL 15 server by hand or set EHSINK_TEST_POSTGRES_DSN" >&2
	exit 1
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then
	sudo=(sudo)
fi

export DEBIAN_FRONTEND=noninteractive
if ! apt-cache show postgresql-15 >/dev/null 2>&1; then
	"${sudo[@]}" apt-get update -q
fi
"${sudo[@]}" apt-get install -y -q --no-install-recommends postgresql-15

if [[ ! -x "$pg_bin/initdb" ]]; then
	echo "install-postgres: postgresql-15 installed but $pg_bin/initdb is missing" >&2
	exit 1
fi
echo "install-postgres: installed PostgreSQL 15 in $pg_bin"
