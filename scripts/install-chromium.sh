#!/usr/bin/env bash
# Install Debian's chromium, which the tests use headless to render `tunex report` pages.
#
# Idempotent: does nothing when chromium is already on PATH, and runs `apt-get update` only when
# installing from the current package lists fails.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
    echo "chromium already installed: $(command -v chromium)"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        exec sudo -E "$0" "$@"
    fi
    echo "install-chromium.sh: run as root (or install sudo) to apt-get install chromium" >&2
    exit 1
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-chromium.sh: no apt-get here; install chromium with this system's package" \
         "manager (the report tests skip without it)" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
install() {
    apt-get install -y --no-install-recommends chromium
}

if ! install; then
    echo "install-chromium.sh: installing from the current package lists failed;" \
         "running apt-get update and trying again" >&2
    apt-get update
    install
fi
echo "chromium installed: $(command -v chromium)"
