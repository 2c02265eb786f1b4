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

if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        exec sudo -E "$0" "$@"
    fi
    echo "install-postgres.sh: run as root (or install sudo) to apt-get install postgresql" >&2
    exit 1
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-postgres.sh: no apt-get here; install PostgreSQL with this system's package" \
         "manager so that initdb and pg_ctl are on disk" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
install() {
    apt-get install -y --no-install-recommends postgresql
}

if ! install; then
    echo "install-postgres.sh: installing from the current package lists failed;" \
         "running apt-get update and trying again" >&2
    apt-get update
    install
fi

if ! initdb=$(find_initdb) || [ -z "$initdb" ]; then
    echo "install-postgres.sh: postgresql installed but no /usr/lib/postgresql/*/bin/initdb" >&2
    exit 1
fi
echo "PostgreSQL installed: $initdb"
