#!/usr/bin/env bash
# Install Debian's PostgreSQL server binaries (initdb, pg_ctl) for tunex's PostgreSQL tests.
#
# Idempotent: does nothing when /usr/lib/postgresql/*/bin/initdb already exists, and runs
# `apt-get update` only when installing from the current package lists fails. The tests start
# their own throwaway server (tests/conftest.py), so the cluster that Debian's package creates
# is not needed; it is left as Debian configures it.
set -euo pipefail

find_initdb() {
    compgen -G "/usr/lib/postgresql/*/bin/initdb" | sort -V | tail -n 1
}

if initdb=$(find_initdb) && [ -n "$initdb" ]; then
    echo "PostgreSQL already installed: $initdb"
    exit 0
fi

name=install-postgres.sh
# shellcheck source=scripts/_apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/_apt.sh"
apt_install postgresql

if ! initdb=$(find_initdb) || [ -z "$initdb" ]; then
    echo "install-postgres.sh: postgresql installed but no /usr/lib/postgresql/*/bin/initdb" >&2
    exit 1
fi
echo "PostgreSQL installed: $initdb"
