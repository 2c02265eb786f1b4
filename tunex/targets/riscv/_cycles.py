"""A deterministic cycle estimate of a RISC-V kernel: executed blocks x a per-block cycle model.

QEMU's txbb plugin counts how often each translated block (TB) ran; the kernel's functions
(symbols starting ``tx_``, and the functions of its source file) are disassembled
with llvm-objdump-19, and each block that ran inside them is costed once:

- cores with an llvm-mca-19 scheduling model (x280, p670): llvm-mca's steady-state cycles per
  iteration of the block (``TotalCycles / Iterations`` over 100 iterations), all blocks in one
  llvm-mca call as separate ``LLVM-MCA-BEGIN`` regions;
- the SpacemiT X60 (no llvm-mca model): the sum of its instructions' measured reciprocal
  throughputs from the rvv-bench tables (``shared/data/riscv/rvv-bench``, vl=VLMAX, tail and
  mask agnostic) at the SEW and LMUL each one runs with, scalar instructions at 1/issue width.

vtype tracking (the SEW and LMUL of a vector instruction) is static: the last ``vsetvli`` or
``vsetivli`` before the instruction in address order within its function. That is exact for
the usual shape of compiled RVV code (a vsetvli at the top of each strip-mined loop, QEMU ends a
block at each vsetvli) and wrong only when a block is entered by a jump from a vsetvli that
lies after it in memory; a ``vsetvl`` (vtype from a register) makes the vtype unknown until the
next vsetvli. Unknown vtype: llvm-mca gets no instrument (its own conservative default) and the
table model assumes e32, m1. llvm-mca-19 also reads the vtype of a vsetvli inside a region; the
instrument comments (``# LLVM-MCA-RISCV-LMUL M2`` / ``# LLVM-MCA-RISCV-SEW E32``, upper case,
both needed) are put at the start of each region for the vtype in force there.
"""

from __future__ import annotations

import functools
import gzip
import json
import math
import os
import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from tunex.errors import TargetError
from tunex.targets.riscv._toolchain import Core, Toolchain

__all__ = [
    "CycleEstimate",
    "Insn",
    "data_dir",
    "disassemble",
    "estimate",
    "function_ranges",
    "parse_disassembly",
    "read_counts",
    "rvv_bench_table",
    "static_facts",
    "vtype_map",
]

#: (SEW in bits, LMUL as written in vsetvli: "mf8".."m8"), or None when unknown.
Vtype = tuple[int, str] | None

_MCA_ITERATIONS = 100
# Instructions a core starts per cycle, for scalar instructions in the table model.
_ISSUE_WIDTH = {"x60": 2, "x280": 2, "p670": 4}
_DEFAULT_VTYPE = (32, "m1")


@dataclass(frozen=True)
class Insn:
    """One disassembled instruction; ``target`` is the address a branch, jump or call goes to."""

    addr: int
    size: int
    mnemonic: str
    operands: str
    target: int | None = None

    @property
    def is_vector(self) -> bool:
        """An RVV instruction other than the vtype setters (every RVV mnemonic starts with v)."""
        return self.mnemonic.startswith("v") and not self.mnemonic.startswith("vset")

    @property
    def text(self) -> str:
        return f"{self.mnemonic}\t{self.operands}" if self.operands else self.mnemonic


@dataclass(frozen=True)
class CycleEstimate:
    """The modelled cost of one run of a kernel's ``tx_`` functions.

    ``cycles``: sum over executed blocks of count x modelled cycles of the block; ``insns`` and
    ``vector_insns``: instructions executed inside the functions (vtype setters are not vector);
    ``blocks``: distinct blocks that ran there; ``model``: what costed them.
    """

    cycles: float
    insns: int
    vector_insns: int
    blocks: int
    model: str


# --- symbols and disassembly ---------------------------------------------------------------

def function_ranges(elf: Path, tc: Toolchain, prefix: str = "tx_", unit: str = "kernel.c"
                    ) -> list[tuple[int, int, str]]:
    """``(start, end, name)`` of the kernel's functions, by address: those whose symbol starts
    with ``prefix`` and the ``static`` ones of the source file ``unit``.

    The kernel harness names its timed functions ``tx_*``; a kernel's helpers that the
    compiler did not inline run in the same call, so they are counted and costed too.
    Local symbols follow the file symbol of their source in the symbol table (``nm -p``), and
    the binaries are linked with hidden visibility, which makes every function local: a helper
    a kernel did not declare ``static`` is its source file's too.
    """
    nm = tc.require("nm")
    proc = subprocess.run([str(nm), "-a", "-p", "-S", "--defined-only", str(elf)],
                          capture_output=True, text=True, timeout=60, check=False)
    if proc.returncode != 0:
        raise TargetError(f"llvm-nm-19 cannot read {elf}: {proc.stderr.strip()}")
    out: dict[int, tuple[int, int, str]] = {}
    in_unit = False
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) != 4:
            continue
        kind, name = parts[2], parts[3]
        if kind == "a" and not name.startswith("$"):  # a file symbol: whose locals follow
            in_unit = name == unit
            continue
        if not ((kind in ("T", "t", "W") and name.startswith(prefix))
                or (kind == "t" and in_unit and not name.startswith("$"))):
            continue
        start, size = int(parts[0], 16), int(parts[1], 16)
        if size > 0:
            out[start] = (start, start + size, name)
    return sorted(out.values())


# "   3029c: 0d0576d7     \tvsetvli\ta3, a0, ..." (RISC-V prints the raw bytes as one word)
_LINE = re.compile(r"^\s*([0-9a-f]+):\s+([0-9a-f]{4,}(?: [0-9a-f]{2,})*)\s+(\S+)\s*(.*)$")
_TARGET = re.compile(r"(0x[0-9a-f]+|[0-9a-f]+) <[^>]*>")


def parse_disassembly(text: str) -> dict[int, Insn]:
    """Instructions of llvm-objdump's ``-d`` output (with raw bytes, which give the sizes)."""
    insns: dict[int, Insn] = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        addr = int(m.group(1), 16)
        size = len(m.group(2).replace(" ", "")) // 2
        operands = m.group(4).strip()
        target = None
        t = _TARGET.search(operands)
        if t:
            target = int(t.group(1), 16)
            operands = operands[: t.start()].rstrip()
            # "@T": a placeholder that the llvm-mca input turns into a label
            operands = f"{operands} @T" if operands else "@T"
        insns[addr] = Insn(addr, size, m.group(3), operands, target)
    return insns


def disassemble(elf: Path, tc: Toolchain, ranges: Sequence[tuple[int, int, str]]
                ) -> dict[int, Insn]:
    """The instructions of ``ranges`` (address -> :class:`Insn`), one llvm-objdump call."""
    if not ranges:
        return {}
    objdump = tc.require("objdump")
    lo, hi = min(r[0] for r in ranges), max(r[1] for r in ranges)
    proc = subprocess.run([str(objdump), "-d", "--mattr=+v", f"--start-address={lo:#x}",
                           f"--stop-address={hi:#x}", str(elf)],
                          capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        raise TargetError(f"llvm-objdump-19 cannot disassemble {elf}: {proc.stderr.strip()}")
    insns = parse_disassembly(proc.stdout)
    return {a: i for a, i in insns.items() if any(r[0] <= a < r[1] for r in ranges)}


# --- vtype tracking --------------------------------------------------------------------------

_VSET = re.compile(r"\be(8|16|32|64)\s*,\s*(mf8|mf4|mf2|m1|m2|m4|m8)\b")


def vtype_map(insns: Mapping[int, Insn], ranges: Sequence[tuple[int, int, str]]
              ) -> dict[int, Vtype]:
    """The vtype in force at each instruction (before it executes): see the module docstring.

    Tracked per function in address order from the last vsetvli/vsetivli; ``None`` before the
    first one or after a ``vsetvl``.
    """
    out: dict[int, Vtype] = {}
    for lo, hi, _ in ranges:
        current: Vtype = None
        for addr in sorted(a for a in insns if lo <= a < hi):
            insn = insns[addr]
            out[addr] = current
            if insn.mnemonic in ("vsetvli", "vsetivli"):
                m = _VSET.search(insn.operands)
                current = (int(m.group(1)), m.group(2)) if m else None
            elif insn.mnemonic == "vsetvl":
                current = None
    return out


# --- plugin output ---------------------------------------------------------------------------

def read_counts(path: Path) -> list[tuple[int, int, int]]:
    """``(vaddr, ninsns, count)`` per executed block, from the txbb plugin's output file."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise TargetError(f"no block counts at {path} ({exc.strerror}): the QEMU plugin did not "
                          "write them; check that the run exited normally") from None
    out: list[tuple[int, int, int]] = []
    for n, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        try:
            vaddr, ninsns, count = int(parts[0], 16), int(parts[1]), int(parts[2])
        except (ValueError, IndexError):
            raise TargetError(f"{path}:{n}: expected '0xADDR NINSNS COUNT', got {line!r}; "
                              "rebuild the plugin with scripts/install-riscv.sh") from None
        out.append((vaddr, ninsns, count))
    return out


# --- llvm-mca --------------------------------------------------------------------------------

_MCA_CACHE: dict[tuple[str, str], float] = {}


def _region_text(insns: Sequence[Insn], vtype: Vtype) -> str:
    # branch targets stay "@T": each region gets its own label for them (one past its end)
    lines = []
    if vtype is not None:
        lines += [f"# LLVM-MCA-RISCV-LMUL {vtype[1].upper()}", f"# LLVM-MCA-RISCV-SEW E{vtype[0]}"]
    for insn in insns:
        lines.append(insn.text)
    lines.append("@T:")
    return "\n".join(lines)


def _mca_cycles(bodies: Sequence[str], mcpu: str, tc: Toolchain) -> list[float]:
    """Steady-state cycles per iteration of each assembly body, in one llvm-mca call."""
    todo = sorted({b for b in bodies if (mcpu, b) not in _MCA_CACHE})
    if todo:
        mca = tc.require("mca")
        lines: list[str] = []
        for n, body in enumerate(todo):
            lines += [f"# LLVM-MCA-BEGIN r{n}", body.replace("@T", f".Lr{n}"),
                      "# LLVM-MCA-END"]
        src = "\n".join(lines) + "\n"
        for _ in range(20):  # drop lines llvm-mca cannot assemble (rare), then retry
            proc = subprocess.run([str(mca), "-mtriple=riscv64", f"-mcpu={mcpu}",
                                   f"-iterations={_MCA_ITERATIONS}", "-json"], input=src,
                                  capture_output=True, text=True, timeout=120, check=False)
            if proc.returncode == 0:
                break
            bad = {int(m) for m in re.findall(r"<stdin>:(\d+):\d+: error", proc.stderr)}
            if not bad:
                raise TargetError(f"llvm-mca-19 failed: {proc.stderr.strip()[:500]}")
            src = "\n".join(ln for i, ln in enumerate(src.splitlines(), 1)
                            if i not in bad) + "\n"
        else:
            raise TargetError(f"llvm-mca-19 failed: {proc.stderr.strip()[:500]}")
        doc = json.loads(proc.stdout)
        found = {}
        for region in doc.get("CodeRegions", []):
            summary = region.get("SummaryView", {})
            iters = summary.get("Iterations") or _MCA_ITERATIONS
            found[region.get("Name")] = summary.get("TotalCycles", 0) / iters
        for n, body in enumerate(todo):
            _MCA_CACHE[(mcpu, body)] = float(found.get(f"r{n}", 0.0))
    return [_MCA_CACHE[(mcpu, b)] for b in bodies]


# --- rvv-bench tables ------------------------------------------------------------------------

def data_dir() -> Path:
    """The shared RISC-V data (``TUNEX_RISCV_DATA``, else ``shared/data/riscv`` by the repo)."""
    env = os.environ.get("TUNEX_RISCV_DATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3].parent / "shared" / "data" / "riscv"


class _TableParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.header: list[str] = []
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None
        self._row: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if self._row and not self.header:
                self.header = self._row
            elif self._row:
                self.rows.append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


@functools.lru_cache(maxsize=8)
def rvv_bench_table(name: str, variant: str = "Maa") -> dict[str, dict[str, float]]:
    """Measured cycles per instruction of an rvv-bench page: row text -> {"e32m1": 1.0, ...}.

    ``name`` is the page (``spacemit_x60``, ``sifive_x280``); ``variant`` the table (``Maa``:
    vl=VLMAX, tail and mask agnostic), its empty cells filled from the other policy variants
    of the same vl where those measured them. Cells no variant measured are left out.
    """
    path = data_dir() / "rvv-bench" / f"{name}.html.gz"
    try:
        html = gzip.decompress(path.read_bytes()).decode("utf-8", "replace")
    except OSError as exc:
        raise TargetError(f"rvv-bench table {path} unreadable ({exc}): set TUNEX_RISCV_DATA to "
                          "the directory holding rvv-bench/") from None
    if html.find(f'<table id="tbl{variant}"') < 0:
        raise TargetError(f"{path} has no table tbl{variant} (variants: Maa, Mau, 1aa, ...)")
    # Some pages leave a form unmeasured in one policy variant and measure it in another (the
    # X60's floating-point rows are empty in tblMaa): cells missing from ``variant`` come from
    # the other variants of the same vl, in page order. The policies barely change the cost
    # of an unmasked instruction.
    order = [variant] + [v for v in ("Maa", "Mau", "Mua", "Muu", "1aa", "1au", "1ua", "1uu")
                         if v != variant and v[0] == variant[0]]
    table: dict[str, dict[str, float]] = {}
    for v in order:
        start = html.find(f'<table id="tbl{v}"')
        if start < 0:
            continue
        end = html.find("</table>", start)
        parser = _TableParser()
        parser.feed(html[start:end + len("</table>")])
        for row in parser.rows:
            merged = table.setdefault(row[0], {})
            for col, value in zip(parser.header[1:], row[1:], strict=False):
                try:
                    merged.setdefault(col, float(value))
                except ValueError:
                    continue
    return table


@functools.lru_cache(maxsize=8)
def _forms(name: str) -> dict[tuple[str, bool], dict[str, float]]:
    # (mnemonic, masked) -> the first measured row of that form
    out: dict[tuple[str, bool], dict[str, float]] = {}
    for row, cells in rvv_bench_table(name).items():
        out.setdefault((row.split()[0], row.endswith("v0.t")), cells)
    return out


_LMULS = {"mf8": 0.125, "mf4": 0.25, "mf2": 0.5, "m1": 1.0, "m2": 2.0, "m4": 4.0, "m8": 8.0}
_WHOLE_LOAD = re.compile(r"^vl([1248])re(8|16|32|64)\.v$")
_WHOLE_STORE = re.compile(r"^vs([1248])r\.v$")
_INDEXED = re.compile(r"^v([ls])[ou]xei(8|16|32|64)\.v$")


def _lookup(cells: Mapping[str, float], sew: int, lmul: str) -> float | None:
    key = f"e{sew}{lmul}"
    if key in cells:
        return cells[key]
    # an empty cell: the same LMUL at the nearest SEW, else the same SEW at the nearest LMUL
    # scaled by the LMUL ratio (cost grows with the registers an instruction touches)
    parsed = [(int(m.group(1)), m.group(2), v) for k, v in cells.items()
              if (m := re.fullmatch(r"e(\d+)(mf?\d)", k))]
    same = [(abs(s - sew), v) for s, lm, v in parsed if lm == lmul]
    if same:
        return min(same)[1]
    want = _LMULS[lmul]
    scaled = [(abs(math.log2(_LMULS[lm] / want)), v * want / _LMULS[lm])
              for s, lm, v in parsed if s == sew]
    return min(scaled)[1] if scaled else None


def _table_cost(insn: Insn, vtype: Vtype, table: str, issue_width: int) -> float:
    """Cycles of one instruction on a core known by its rvv-bench table.

    Vector instructions: the measured cell for the form (masked when it ends in ``v0.t``) at
    the vtype. Forms the page lacks: whole-register loads/stores as unit-stride ``vle``/``vse``
    of that EEW at LMUL = register count; indexed loads/stores as strided ones (``vlse``/
    ``vsse``) at the vtype; anything else as ``vadd.vv`` at the vtype (a one-pass ALU op).
    Scalar instructions and vtype setters: 1 / issue width.
    """
    if not insn.is_vector:
        return 1.0 / issue_width
    sew, lmul = vtype or _DEFAULT_VTYPE
    forms = _forms(table)
    masked = insn.operands.replace(" ", "").endswith("v0.t")
    mnemonic = insn.mnemonic
    if m := _WHOLE_LOAD.match(mnemonic):
        mnemonic, sew, lmul, masked = f"vle{m.group(2)}.v", int(m.group(2)), f"m{m.group(1)}", False
    elif m := _WHOLE_STORE.match(mnemonic):
        mnemonic, sew, lmul, masked = "vse8.v", 8, f"m{m.group(1)}", False
    elif m := _INDEXED.match(mnemonic):
        mnemonic = f"v{m.group(1)}se{sew}.v"
    cells = forms.get((mnemonic, masked)) or forms.get((mnemonic, not masked))
    cost = _lookup(cells, sew, lmul) if cells else None
    if cost is None:
        cost = _lookup(forms.get(("vadd.vv", masked), {}), sew, lmul)
    return cost if cost is not None else _LMULS[lmul]


# --- the estimate ----------------------------------------------------------------------------

def _model_name(core: Core) -> str:
    if core.mca_model:
        return f"llvm-mca-19:{core.mcpu}"
    if core.table:
        return f"rvv-bench:{core.table}"
    raise TargetError(f"core {core.name} has neither an llvm-mca model nor an rvv-bench table; "
                      "use x280, p670 or x60")


def _block_cycles(blocks: Sequence[tuple[Sequence[Insn], Vtype]], vtypes: Mapping[int, Vtype],
                  core: Core, tc: Toolchain) -> list[float]:
    """Modelled cycles per execution of each block (instructions, vtype at its start)."""
    _model_name(core)
    if core.mca_model:
        return _mca_cycles([_region_text(b, vt) for b, vt in blocks], core.mcpu, tc)
    width = _ISSUE_WIDTH.get(core.name, 1)
    table = str(core.table)
    out = []
    for insns, _ in blocks:
        out.append(sum(_table_cost(i, vtypes.get(i.addr), table, width) for i in insns))
    return out


def _blocks_in(insns: Mapping[int, Insn]) -> tuple[list[int], dict[int, int]]:
    order = sorted(insns)
    return order, {a: n for n, a in enumerate(order)}


def estimate(elf: Path, counts: Iterable[tuple[int, int, int]], core: Core, tc: Toolchain,
             ranges: Sequence[tuple[int, int, str]]) -> CycleEstimate:
    """Cycles of one run: sum over executed blocks in ``ranges`` of count x cycles(block).

    ``counts`` are the plugin's ``(vaddr, ninsns, count)``; blocks starting outside ``ranges``
    are ignored. Deterministic for a given binary and counts (see the module docstring for the
    model and what it leaves out).
    """
    model = _model_name(core)
    insns = disassemble(elf, tc, ranges)
    vtypes = vtype_map(insns, ranges)
    order, index = _blocks_in(insns)
    blocks: list[tuple[list[Insn], Vtype]] = []
    weights: list[int] = []
    total_insns = vector = 0
    for vaddr, ninsns, count in counts:
        if vaddr not in index or count <= 0:
            continue
        start = index[vaddr]
        body = [insns[a] for a in order[start:start + ninsns]]
        blocks.append((body, vtypes.get(vaddr)))
        weights.append(count)
        total_insns += count * ninsns
        vector += count * sum(1 for i in body if i.is_vector)
    cycles = _block_cycles(blocks, vtypes, core, tc)
    total = sum(w * c for w, c in zip(weights, cycles, strict=True))
    return CycleEstimate(cycles=round(total, 3), insns=total_insns, vector_insns=vector,
                         blocks=len(blocks), model=model)


# --- static facts ----------------------------------------------------------------------------

_SP = re.compile(r"\(sp\)")
_SCALAR_STORES = ("sd", "sw", "fsd", "fsw", "sh", "sb", "fsh")
_SCALAR_LOADS = ("ld", "lw", "lwu", "fld", "flw", "lh", "lhu", "lb", "lbu", "flh")


def _is_frame_setup(insn: Insn) -> bool:
    if insn.mnemonic in _SCALAR_STORES and _SP.search(insn.operands):
        return True
    ops = insn.operands.replace(" ", "")
    return insn.mnemonic == "addi" and ops.startswith("sp,sp,")


def _is_frame_teardown(insn: Insn) -> bool:
    if insn.mnemonic in _SCALAR_LOADS and _SP.search(insn.operands):
        return True
    ops = insn.operands.replace(" ", "")
    return insn.mnemonic == "addi" and ops.startswith("sp,sp,")


def static_facts(elf: Path, core: Core, tc: Toolchain, ranges: Sequence[tuple[int, int, str]]
                 ) -> dict[str, float]:
    """Compile-time facts of the kernel functions for the cost model and for pruning.

    - ``code_bytes``: size of the functions.
    - ``vector_spills``: whole-register and unit-stride vector stores/loads (``vs<n>r.v``,
      ``vl<n>re<eew>.v``, ``vse``/``vle``) whose base register points into the stack frame:
      ``sp`` itself or a register set by ``add``/``addi``/``mv``/``sub`` from one that does
      (spill slots of scalable vectors sit at ``sp + k * vlenb``). Whole-register accesses to
      other memory are ordinary loads of vectorised loops, not spills.
    - ``scalar_spills``: scalar loads/stores addressed off ``sp`` that are not the
      prologue/epilogue: the prologue is the leading run of ``addi sp`` and stores to ``sp`` of
      each function, an epilogue the run of ``sp`` loads and ``addi sp`` just before a ``ret``.
    - ``hot_loop_insns``/``hot_loop_cycles``: the innermost loop (a backward branch whose body,
      target to branch, holds no other backward branch) with the most vector instructions,
      and its cycles per iteration by the same model as :func:`estimate` (0 if no loop).
    """
    insns = disassemble(elf, tc, ranges)
    vtypes = vtype_map(insns, ranges)
    vector_spills = scalar_spills = 0
    loops: list[tuple[int, int]] = []
    for lo, hi, _ in ranges:
        body = [insns[a] for a in sorted(insns) if lo <= a < hi]
        frame: set[int] = set()
        for insn in body:
            if not _is_frame_setup(insn):
                break
            frame.add(insn.addr)
        for n, insn in enumerate(body):
            if insn.mnemonic == "ret":
                k = n - 1
                while k >= 0 and _is_frame_teardown(body[k]):
                    frame.add(body[k].addr)
                    k -= 1
        stack = {"sp"}  # registers that hold an address in the frame (sp + offset)
        for insn in body:
            mn = insn.mnemonic
            base = re.search(r"\((\w+)\)", insn.operands)
            vector_mem = bool(_WHOLE_LOAD.match(mn) or _WHOLE_STORE.match(mn)
                              or re.match(r"^v[ls]e\d+\.v$", mn))
            if vector_mem and base and base.group(1) in stack:
                vector_spills += 1
            ops = [o.strip() for o in insn.operands.split(",")]
            if not mn.startswith(("v", "s", "fs", "b", "j")) and ops and ops[0] != "sp":
                if mn in ("add", "addi", "mv", "sub") and any(o in stack for o in ops[1:]):
                    stack.add(ops[0])
                else:
                    stack.discard(ops[0])
            elif (mn in _SCALAR_STORES or mn in _SCALAR_LOADS) and _SP.search(insn.operands) \
                    and insn.addr not in frame:
                scalar_spills += 1
            if insn.target is not None and lo <= insn.target <= insn.addr and \
                    (mn.startswith("b") or mn in ("j", "jal")) and "ra" not in insn.operands:
                loops.append((insn.target, insn.addr))
    innermost = [(t, b) for t, b in loops
                 if not any((t2, b2) != (t, b) and t <= t2 and b2 <= b for t2, b2 in loops)]
    hot_cycles = hot_insns = 0.0
    if innermost:
        def vcount(loop: tuple[int, int]) -> int:
            return sum(1 for a, i in insns.items() if loop[0] <= a <= loop[1] and i.is_vector)

        t, b = max(innermost, key=lambda lp: (vcount(lp), -lp[0]))
        body = [insns[a] for a in sorted(insns) if t <= a <= b]
        hot_insns = float(len(body))
        hot_cycles = round(_block_cycles([(body, vtypes.get(t))], vtypes, core, tc)[0], 3)
    return {"code_bytes": float(sum(hi - lo for lo, hi, _ in ranges)),
            "vector_spills": float(vector_spills), "scalar_spills": float(scalar_spills),
            "hot_loop_cycles": hot_cycles, "hot_loop_insns": hot_insns}
