"""The RISC-V cores tunex knows and the host tools that build and simulate kernels for them.

Tools are found on ``PATH`` under their Debian names (clang-19, ld.lld-19, llvm-mca-19,
llvm-objdump-19, llvm-nm-19, qemu-riscv64); ``scripts/install-riscv.sh`` installs them and builds
the QEMU plugin (``txbb.c``) that counts executed blocks. Overrides: ``TUNEX_CLANG``,
``TUNEX_QEMU``, ``TUNEX_QEMU_PLUGIN`` (paths), ``TUNEX_CACHE`` (where the plugin is built,
default ``~/.cache/tunex``).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tunex.errors import TargetError

__all__ = ["CORES", "Core", "Toolchain", "get_core"]


@dataclass(frozen=True)
class Core:
    """A RISC-V vector core: what the compiler tunes for and how its cycles are modelled.

    ``mcpu`` is clang's and llvm-mca's name for it; ``vlen`` the vector register width in bits
    (QEMU emulates exactly that); ``clock_ghz`` converts modelled cycles to time;
    ``mca_model`` says whether llvm-mca-19 has a scheduling model for it; ``table`` names the
    rvv-bench timing page (``shared/data/riscv/rvv-bench/<table>.html.gz``) measured on it.
    """

    name: str
    mcpu: str
    vlen: int
    clock_ghz: float
    mca_model: bool
    table: str | None


# Clocks: the X60 of a Banana Pi BPI-F3 (SpacemiT K1) runs at 1.6 GHz and the X280 of the
# rvv-bench page at 1.75 GHz; the P670 has no board here, 2.0 GHz is nominal. Milliseconds that
# tunex reports for these cores are modelled cycles at these clocks, not measured time.
CORES: dict[str, Core] = {
    "x60": Core("x60", "spacemit-x60", 256, 1.6, False, "spacemit_x60"),
    "x280": Core("x280", "sifive-x280", 512, 1.75, True, "sifive_x280"),
    "p670": Core("p670", "sifive-p670", 128, 2.0, True, None),
}


def get_core(name: str) -> Core:
    """The core called ``name`` (``x60``, ``x280``, ``p670``); target strings carry this name."""
    try:
        return CORES[name]
    except KeyError:
        raise TargetError(
            f"unknown RISC-V core {name!r}: choose one of {', '.join(sorted(CORES))}"
        ) from None


def cache_dir() -> Path:
    """Where install-riscv.sh keeps the QEMU sources it needs and builds the plugin."""
    base = os.environ.get("TUNEX_CACHE") or str(Path.home() / ".cache" / "tunex")
    return Path(base) / "riscv"


_INSTALL = "scripts/install-riscv.sh"

# name -> (env override, executables tried in order, how to get it)
_TOOLS: dict[str, tuple[str | None, tuple[str, ...], str]] = {
    "clang": ("TUNEX_CLANG", ("clang-19",), "apt-get install clang-19"),
    "lld": (None, ("ld.lld-19",), "apt-get install lld-19"),
    "mca": (None, ("llvm-mca-19",), "apt-get install llvm-19"),
    "objdump": (None, ("llvm-objdump-19",), "apt-get install llvm-19"),
    "nm": (None, ("llvm-nm-19",), "apt-get install llvm-19"),
    "qemu": ("TUNEX_QEMU", ("qemu-riscv64", "qemu-riscv64-static"), "apt-get install qemu-user"),
}
# What a need brings along: clang links with lld; the disassembly reads symbols with nm.
_IMPLIES = {"clang": ("lld",), "objdump": ("nm",)}


def _which(name: str) -> Path | None:
    env, names, _ = _TOOLS[name]
    if env and os.environ.get(env):
        found = shutil.which(os.environ[env])
        return Path(found) if found else None
    for exe in names:
        found = shutil.which(exe)
        if found:
            return Path(found)
    return None


def _plugin() -> Path | None:
    env = os.environ.get("TUNEX_QEMU_PLUGIN")
    path = Path(env) if env else cache_dir() / "libtxbb.so"
    return path if path.is_file() else None


@dataclass(frozen=True)
class Toolchain:
    """Resolved paths of the tools; ``None`` for a tool that was not asked for and is missing."""

    clang: Path | None
    lld: Path | None
    mca: Path | None
    objdump: Path | None
    nm: Path | None
    qemu: Path | None
    plugin: Path | None
    sysroot: Path | None

    @classmethod
    def find(cls, need: Iterable[str] = ("clang", "qemu", "mca", "objdump", "plugin")
             ) -> Toolchain:
        """Find the tools, failing on the first needed one that is missing.

        ``need`` names what the caller will use (``clang``, ``lld``, ``mca``, ``objdump``,
        ``nm``, ``qemu``, ``plugin``); the others are looked up too but may be ``None``. The
        error names the missing tool and what installs it, in one line.
        """
        wanted: list[str] = []
        for n in need:
            if n not in _TOOLS and n != "plugin":
                raise TargetError(f"unknown RISC-V tool {n!r}: choose among "
                                  f"{', '.join([*_TOOLS, 'plugin'])}")
            wanted += [n, *_IMPLIES.get(n, ())]
        paths = {n: _which(n) for n in _TOOLS}
        for n in wanted:
            if n == "plugin":
                if _plugin() is None:
                    where = os.environ.get("TUNEX_QEMU_PLUGIN") or cache_dir() / "libtxbb.so"
                    raise TargetError(f"QEMU plugin {where} not found: run {_INSTALL} to "
                                      "build the QEMU plugin")
            elif paths[n] is None:
                env, names, how = _TOOLS[n]
                shown = os.environ.get(env, "") if env else ""
                what = shown or names[0]
                raise TargetError(f"{what} not found: run {_INSTALL} (or {how})")
        sysroot = Path("/usr/riscv64-linux-gnu")
        return cls(clang=paths["clang"], lld=paths["lld"], mca=paths["mca"],
                   objdump=paths["objdump"], nm=paths["nm"], qemu=paths["qemu"],
                   plugin=_plugin(), sysroot=sysroot if sysroot.is_dir() else None)

    def require(self, name: str) -> Path:
        """The path of tool ``name``, or the same error :meth:`find` gives when it is missing."""
        path = self.plugin if name == "plugin" else getattr(self, name, None)
        if path is None:
            Toolchain.find(need=(name,))  # raises with the install hint
            raise TargetError(f"{name} not found: run {_INSTALL}")  # found since: stale object
        return Path(path)

    def versions(self) -> dict[str, str]:
        """Version strings of the tools that change the answer (for target fingerprints)."""
        return dict(_versions(self.clang, self.qemu, self.mca))

    def cross_compile(self, sources: Sequence[Path], out: Path, core: Core,
                      extra_flags: Sequence[str] = (), *, timeout: float | None = 300.0
                      ) -> subprocess.CompletedProcess[str]:
        """Build a static RV64GCV Linux binary of ``sources`` tuned for ``core``.

        ``-march=rv64gcv`` keeps the ISA to what QEMU 7.2 runs (``-mcpu`` alone would also
        enable e.g. Zicond or Zvfh, which it cannot), while ``-mcpu`` picks the core's
        scheduling model. Code is vector-length agnostic: VLEN is whatever the core runs with.
        ``-fvisibility=hidden`` makes every function a local symbol of its source file, so the
        cycle model finds a kernel's helpers whether or not they were declared ``static``.
        Returns the finished process; the caller checks ``returncode`` and ``stderr``.
        Raises :class:`subprocess.TimeoutExpired` past ``timeout`` seconds.
        """
        clang = self.require("clang")
        argv = [str(clang), "--target=riscv64-linux-gnu", "-march=rv64gcv",
                f"-mcpu={core.mcpu}", "-O3", "-static", "-fuse-ld=lld", "-fvisibility=hidden"]
        argv += [*extra_flags, *map(str, sources), "-o", str(out), "-lm"]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              check=False)

    def qemu_argv(self, core: Core, counts_path: Path | None = None, lo: int | None = None,
                  hi: int | None = None) -> list[str]:
        """The command prefix that runs a binary on an emulated ``core`` (append binary, args).

        With ``counts_path`` the txbb plugin writes there how often each translated block
        whose start lies in ``[lo, hi)`` ran (a comma in the path cannot be passed to QEMU).
        """
        qemu = self.require("qemu")
        argv = [str(qemu), "-cpu", f"rv64,v=true,vlen={core.vlen},elen=64,vext_spec=v1.0"]
        if counts_path is not None:
            if "," in str(counts_path):
                raise TargetError(f"QEMU cannot pass a path with a comma to its plugin: "
                                  f"{counts_path}; use another directory")
            plugin = self.require("plugin")
            spec = f"{plugin},outfile={counts_path}"
            if lo is not None:
                spec += f",lo={lo:#x}"
            if hi is not None:
                spec += f",hi={hi:#x}"
            argv += ["-plugin", spec, "-d", "plugin"]
        return argv


@functools.lru_cache(maxsize=8)
def _versions(clang: Path | None, qemu: Path | None, mca: Path | None
              ) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    for name, path in (("clang", clang), ("qemu", qemu), ("mca", mca)):
        if path is None:
            continue
        try:
            text = subprocess.run([str(path), "--version"], capture_output=True, text=True,
                                  timeout=30, check=False).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        lines = [ln.strip() for ln in text.splitlines() if "version" in ln.lower()]
        if lines:
            out.append((name, lines[0]))
    return tuple(out)
