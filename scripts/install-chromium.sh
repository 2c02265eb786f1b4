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

name=install-chromium.sh
# shellcheck source=scripts/_apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/_apt.sh"
apt_install chromium
echo "chromium installed: $(command -v chromium)"
