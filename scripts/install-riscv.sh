#!/usr/bin/env bash
# Install what tunex's RISC-V targets need and build tunex's QEMU plugin.
#
# 1. Debian packages: clang-19, lld-19, llvm-19 (llvm-mca-19, llvm-objdump-19, llvm-nm-19),
#    qemu-user (qemu-riscv64), the riscv64 cross libc (static linking), glib headers, dpkg-dev
#    (apt-get source), and OpenSSH (the riscv-ssh tests use a server on loopback).
# 2. QEMU's plugin header: Debian's qemu source package is fetched with `apt-get source
#    --download-only` into ${TUNEX_CACHE:-~/.cache/tunex}/riscv/qemu-src and only
#    include/qemu/qemu-plugin.h is extracted (no QEMU source is kept in this repository).
# 3. tunex/targets/riscv/txbb.c (tunex's own plugin) compiled against that header into
#    ${TUNEX_CACHE:-~/.cache/tunex}/riscv/libtxbb.so; rebuilt when txbb.c or the header change
#    (sha256 stamp).
#
# Idempotent: each step is skipped when done, and `apt-get update` runs only when installing
# from the current package lists fails. Packages need root (or sudo); the plugin is built as the
# calling user, in their cache.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache="${TUNEX_CACHE:-$HOME/.cache/tunex}/riscv"
src="$here/tunex/targets/riscv/txbb.c"
packages=(clang-19 lld-19 llvm-19 qemu-user gcc-riscv64-linux-gnu libc6-dev-riscv64-cross
          libglib2.0-dev dpkg-dev openssh-server openssh-client)
deb_src=/etc/apt/sources.list.d/tunex-deb-src.sources

name=install-riscv.sh
# shellcheck source=scripts/_apt.sh
source "$here/scripts/_apt.sh"

# --- 1. packages ---------------------------------------------------------------------------
missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done
if [ ${#missing[@]} -eq 0 ]; then
    say "packages already installed (${packages[*]})"
else
    say "installing ${missing[*]}"
    apt_install "${missing[@]}"
fi

# --- 2. qemu-plugin.h from Debian's qemu source package --------------------------------------
mkdir -p "$cache/qemu-src"
header=$(find "$cache/qemu-src" -path '*/include/qemu/qemu-plugin.h' -print -quit 2>/dev/null || true)
if [ -n "$header" ]; then
    say "QEMU plugin header already extracted: $header"
else
    if [ ! -e "$deb_src" ] && ! grep -rqs '^deb-src\|^Types:.*deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then
        say "adding Debian source lists ($deb_src)"
        suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
        printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
            "$suite" | as_root tee "$deb_src" >/dev/null
        as_root apt-get update
    fi
    orig=$(compgen -G "$cache/qemu-src/qemu_*.orig.tar.*" | head -n 1 || true)
    if [ -z "$orig" ]; then
        say "fetching Debian's qemu source package into $cache/qemu-src"
        if ! (cd "$cache/qemu-src" && apt-get source --download-only qemu); then
            say "apt-get source failed; running apt-get update and trying again"
            as_root apt-get update
            (cd "$cache/qemu-src" && apt-get source --download-only qemu)
        fi
        orig=$(compgen -G "$cache/qemu-src/qemu_*.orig.tar.*" | head -n 1 || true)
        [ -n "$orig" ] || die "apt-get source qemu gave no qemu_*.orig.tar.* in $cache/qemu-src"
    else
        say "qemu source already fetched: $orig"
    fi
    say "extracting include/qemu/qemu-plugin.h from $(basename "$orig")"
    tar -xf "$orig" -C "$cache/qemu-src" --wildcards '*/include/qemu/qemu-plugin.h'
    header=$(find "$cache/qemu-src" -path '*/include/qemu/qemu-plugin.h' -print -quit)
    [ -n "$header" ] || die "no include/qemu/qemu-plugin.h in $orig"
fi

# --- 3. the plugin ---------------------------------------------------------------------------
[ -f "$src" ] || die "plugin source $src is missing"
lib="$cache/libtxbb.so"
stamp="$cache/libtxbb.sha256"
want=$(cat "$src" "$header" | sha256sum | cut -d' ' -f1)
if [ -f "$lib" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    say "plugin up to date: $lib"
else
    cflags=()
    if grep -q '#include <glib' "$header"; then
        # shellcheck disable=SC2207
        cflags=($(pkg-config --cflags glib-2.0))
    fi
    say "building $lib from $src"
    cc -shared -fPIC -O2 -Wall -I"$(dirname "$header")" "${cflags[@]}" "$src" -o "$lib.tmp"
    mv "$lib.tmp" "$lib"
    echo "$want" >"$stamp"
fi
say "done (clang: $(command -v clang-19), qemu: $(command -v qemu-riscv64), plugin: $lib)"
