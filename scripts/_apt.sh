# Shared by the install-*.sh scripts (sourced): root/sudo and Debian package installs.
# The sourcing script sets `name` (for messages) before sourcing.

say() { echo "${name}: $*"; }
die() { echo "${name}: $*" >&2; exit 1; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo -E "$@"
    else
        die "run as root (or install sudo) to: $*"
    fi
}

# apt_install PKG...: install Debian packages; `apt-get update` runs only when installing from
# the current package lists fails (idempotent and quick when the lists are fresh).
apt_install() {
    command -v apt-get >/dev/null 2>&1 ||
        die "no apt-get here; install ${*} with this system's package manager"
    export DEBIAN_FRONTEND=noninteractive
    if ! as_root apt-get install -y --no-install-recommends "$@"; then
        say "installing from the current package lists failed; running apt-get update and trying again"
        as_root apt-get update
        as_root apt-get install -y --no-install-recommends "$@"
    fi
}
