"""Config packs: the best config per workload, shipped as a verified JSON document.

A library tunes its kernels once, exports a pack, and ships it; its users load it at runtime
(``tunex.autotune.load_packs(path)`` or ``TUNEX_PACKS=path1:path2``) or import it into their own
database (``tunex pack import``). A pack is data only: loading one parses JSON and checks every
field's type; nothing in it is ever executed (no pickle, no eval).

The document::

    {
      "format": "tunex.pack",            # what this file is
      "schema": 1,                       # PACK_SCHEMA; a newer one is refused
      "name": "mylib", "version": "1.2",
      "created_at": "2026-11-30T12:00:00Z",
      "provenance": {"tunex": "0.1.0", "triton": ["3.6.0"], "cuda": ["13.0"],
                     "devices": [{"device": "NVIDIA H200", "arch": "sm_90"}]},
      "entries": [
        {"kernel": "matmul", "kernel_hash": "9f3c...", "problem": {"M": 1024, ...},
         "target": {"device": "NVIDIA H200", "arch": "sm_90", "triton": "3.6.0"},
         "config": {"BLOCK_M": 128, ..., "num_warps": 8},
         "stats": {"median_ms": 0.0131, "spread": 0.012, "repeats": 100, "min_ms": ...,
                   "q1_ms": ..., "q3_ms": ..., "max_ms": ...},
         "trials": 40, "measured_at": 1764500000.0}
      ],
      "checksum": "sha256:<hex>",        # over the canonical JSON of everything else
      "signature": {"algorithm": "ed25519", "key": "<key id>",      # optional: see below
                    "public_key": "<base64>", "value": "<base64>"}
    }

A checksum catches damage, not forgery: anyone can edit a pack and compute it again. A
publisher therefore signs a pack (Ed25519, :func:`generate_key`, :func:`sign_pack`,
``tunex pack export --sign KEY``) over the same canonical JSON the checksum covers; its users
configure the public keys they trust (``load_pack(..., trusted=[...])``, or
``TUNEX_TRUSTED_KEYS=key.pub:keys_dir``), and then a pack that is unsigned, signed by another
key or whose signature does not match is refused. Where no trusted key is configured unsigned
packs load as before, and a signed one must still carry a valid signature.

Resolution (:meth:`Pack.resolve`, :func:`resolve`) picks, for a workload, the entry of the same
kernel (and the same source hash) in this order:

1. exact bucket on the exact device (same device name and architecture),
2. exact bucket on the same architecture (e.g. tuned on an H100, running on an H200: sm_90),
3. the nearest bucket: among entries whose problem has the same keys and the same non-numeric
   values (dtypes, flags), the smallest sum over numeric entries of ``|log2(a) - log2(b)|``
   (M=2048 is at distance 1 from M=1024, M=4096 at distance 2); at equal distance the exact
   device before the same architecture.

Entries for another architecture are never used. Among equals, the same Triton version wins,
then the pack loaded first, then the entry first in its pack.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import hashlib
import io
import json
import logging
import math
import os
import statistics
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunex._io import read_bounded, too_deep
from tunex.errors import PackError
from tunex.trial import Config, Measurement, Status, Workload, canonical_json, flatten

__all__ = [
    "PACK_FORMAT",
    "PACK_SCHEMA",
    "Pack",
    "PackEntry",
    "Nearness",
    "PackMatch",
    "TRUSTED_KEYS_ENV",
    "export_pack",
    "generate_key",
    "import_pack",
    "load_pack",
    "sign_pack",
    "trusted_keys",
    "nearness",
    "rank_workloads",
    "resolve",
    "target_arch",
    "target_device",
]

log = logging.getLogger("tunex.db")

#: The ``format`` field of every pack.
PACK_FORMAT = "tunex.pack"
#: The pack schema this tunex writes and the newest one it reads.
PACK_SCHEMA = 1

_TOP_KEYS = frozenset(
    {"format", "schema", "name", "version", "created_at", "provenance", "entries", "checksum",
     "signature"}
)
_SIGNATURE_KEYS = frozenset({"algorithm", "key", "public_key", "value"})
#: Where loaders find the public keys they trust (files or folders of ``*.pub``), separated
#: by ``os.pathsep``.
TRUSTED_KEYS_ENV = "TUNEX_TRUSTED_KEYS"
_ENTRY_KEYS = frozenset(
    {"kernel", "kernel_hash", "problem", "target", "config", "stats", "trials", "measured_at"}
)
_STATS_KEYS = ("median_ms", "spread", "repeats", "min_ms", "q1_ms", "q3_ms", "max_ms")
_MAX_BYTES = 64 * 1024 * 1024
#: The deepest nesting of lists and objects a pack may hold (an entry's problem nests 4).
_MAX_DEPTH = 32
#: The most a trusted-key file may hold (a key is one line of about 60 bytes).
_MAX_KEY_BYTES = 1 << 20


# -- target facts ------------------------------------------------------------------------------


def target_device(target: Mapping[str, Any]) -> str | None:
    """The device name of a target fingerprint (``"NVIDIA H200"``), None when it has none."""
    for k in ("device", "device_name", "gpu", "name"):
        v = target.get(k)
        if isinstance(v, str) and v:
            return v
    return None


def target_arch(target: Mapping[str, Any]) -> str | None:
    """The architecture of a target fingerprint, normalised (``"sm_90"``), None when unknown.

    Reads ``arch`` (``"sm_90"``, ``"90"``) or a compute capability (``"9.0"``, ``[9, 0]``,
    ``90``) under ``capability``, ``compute_capability`` or ``cc``.
    """
    for k in ("arch", "capability", "compute_capability", "cc"):
        v = target.get(k)
        if v is None or isinstance(v, bool):
            continue
        if isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, int) for x in v):
            return f"sm_{v[0]}{v[1]}"
        if isinstance(v, int):
            return f"sm_{v}"
        if isinstance(v, str) and v:
            s = v.strip().lower()
            if s.startswith("sm_") or s.startswith("gfx") or not s[:1].isdigit():
                return s
            if "." in s:
                major, _, minor = s.partition(".")
                return f"sm_{major}{minor}"
            return f"sm_{s}"
    return None


def _toolchain(target: Mapping[str, Any]) -> Any:
    return target.get("triton")


# -- values ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PackEntry:
    """The best config of one workload, with the statistics of its measurement.

    Attributes:
        workload: kernel (name and source hash), bucketed problem key and target fingerprint.
        config: the best config found.
        median_ms, spread, repeats: median runtime, relative interquartile range, number of
            timed repeats.
        min_ms, q1_ms, q3_ms, max_ms: the rest of the five-number summary of the repeats.
        trials: how many trials the workload had when the pack was made.
        measured_at: when the best measurement ended (seconds since the epoch).
    """

    workload: Workload
    config: Config
    median_ms: float
    spread: float
    repeats: int
    min_ms: float
    q1_ms: float
    q3_ms: float
    max_ms: float
    trials: int
    measured_at: float

    @classmethod
    def from_measurement(cls, workload: Workload, m: Measurement, trials: int) -> PackEntry:
        times = sorted(m.times_ms)
        if len(times) >= 2:
            q1, _, q3 = statistics.quantiles(times, n=4, method="inclusive")
        else:
            q1 = q3 = times[0]
        return cls(workload, m.config, m.value, m.spread, len(times), times[0], q1, q3,
                   times[-1], trials, float(m.ended_at))

    def measurement(self, pack: str = "") -> Measurement:
        """The entry as a measurement whose median and spread are the entry's.

        Its runtimes are the five-number summary (min, q1, median, q3, max), or the median
        alone for a single repeat; ``facts`` say which pack it came from and the real number
        of repeats.
        """
        times = ((self.median_ms,) if self.repeats <= 1 else
                 (self.min_ms, self.q1_ms, self.median_ms, self.q3_ms, self.max_ms))
        facts: dict[str, Any] = {"repeats": self.repeats, "trials": self.trials}
        if pack:
            facts["pack"] = pack
        return Measurement(self.config, Status.OK, times, facts=facts,
                           started_at=self.measured_at, ended_at=self.measured_at)

    def to_dict(self) -> dict[str, Any]:
        w = self.workload
        return {
            "kernel": w.kernel, "kernel_hash": w.kernel_hash, "problem": dict(w.problem),
            "target": dict(w.target), "config": self.config.to_dict(),
            "stats": {"median_ms": self.median_ms, "spread": self.spread,
                      "repeats": self.repeats, "min_ms": self.min_ms, "q1_ms": self.q1_ms,
                      "q3_ms": self.q3_ms, "max_ms": self.max_ms},
            "trials": self.trials, "measured_at": self.measured_at,
        }


@dataclass(frozen=True)
class PackMatch:
    """What :func:`resolve` found for a workload.

    Attributes:
        pack: the pack holding the entry.
        entry: the entry picked.
        tier: ``"exact"`` (exact device, exact bucket), ``"arch"`` (same architecture, exact
            bucket), or ``"nearest"`` (nearest bucket).
        distance: log2 distance between the problems (0 for an exact bucket).
        reason: one line saying why, e.g. ``"pack mylib-1.2 exact device"``.
    """

    pack: Pack
    entry: PackEntry
    tier: str
    distance: float
    reason: str

    @property
    def config(self) -> Config:
        return self.entry.config


@dataclass(frozen=True)
class Pack:
    """A verified config pack (see the module docs for its document and resolution order).

    Build one with :func:`export_pack`, read one with :func:`load_pack`.
    """

    name: str
    version: str
    entries: tuple[PackEntry, ...]
    provenance: Mapping[str, Any] = field(default_factory=dict)
    created_at: str = ""
    checksum: str = ""
    source: str | None = None  # the file it was read from
    #: The signature block, when the pack is signed (checked on load).
    signature: Mapping[str, str] | None = None
    #: Whether the signer is one of the keys the loader trusts (None: no keys configured).
    trusted: bool | None = None

    @property
    def signer(self) -> str | None:
        """The id of the key that signed the pack (its signature checked), or None."""
        return None if self.signature is None else self.signature["key"]

    @property
    def label(self) -> str:
        """``name-version``, as shown in logs."""
        return f"{self.name}-{self.version}"

    def kernels(self) -> dict[str, set[str]]:
        """Kernel name -> the source hashes the pack holds configs for."""
        out: dict[str, set[str]] = {}
        for e in self.entries:
            out.setdefault(e.workload.kernel, set()).add(e.workload.kernel_hash)
        return out

    def content(self) -> dict[str, Any]:
        """The document without its checksum: what the checksum covers."""
        return {
            "format": PACK_FORMAT, "schema": PACK_SCHEMA, "name": self.name,
            "version": self.version, "created_at": self.created_at,
            "provenance": _plain(self.provenance),
            "entries": [e.to_dict() for e in self.entries],
        }

    def to_dict(self) -> dict[str, Any]:
        content = self.content()
        doc = {**content, "checksum": _checksum(content)}
        if self.signature is not None:
            doc["signature"] = dict(self.signature)
        return doc

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=True) + "\n"

    def write(self, path: str | os.PathLike[str]) -> Pack:
        """Write the pack to ``path`` atomically; return it with its checksum set."""
        text = self.to_json()
        target = Path(os.fspath(path))
        tmp = None
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            # mkstemp makes the file private (0600); a pack is meant to be shipped and read
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
            os.replace(tmp, target)
        except OSError as exc:
            if tmp is not None:  # a half-written or unplaced copy is not left behind
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            raise PackError(f"cannot write pack {target} ({exc}): check the path and its "
                            "permissions") from exc
        return Pack(self.name, self.version, self.entries, self.provenance, self.created_at,
                    _checksum(self.content()), str(target), self.signature, self.trusted)

    def resolve(self, workload: Workload) -> PackMatch | None:
        """This pack's best entry for ``workload`` (see the module docs), or None."""
        return resolve([self], workload)


# -- resolution --------------------------------------------------------------------------------


def _problem_distance(a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
    """Sum of |log2 x - log2 y| over numeric entries (a list such as a recorded
    ``problem_size: [M, N, K]`` element by element); inf when the problems are not comparable
    (other keys or list lengths, or a non-numeric value that differs)."""
    a, b = flatten(a), flatten(b)
    if a.keys() != b.keys():
        return math.inf
    d = 0.0
    for k, x in a.items():
        y = b[k]
        if x == y and type(x) is type(y):
            continue
        numeric = (isinstance(x, (int, float)) and isinstance(y, (int, float))
                   and not isinstance(x, bool) and not isinstance(y, bool))
        if numeric and x > 0 and y > 0:
            d += abs(math.log2(x) - math.log2(y))
            continue
        return math.inf
    return d


@dataclass(frozen=True)
class Nearness:
    """How a tuned workload stands to the one asking (see the module docs for the order).

    Attributes:
        rank: sort key, smaller is better (exact bucket first, then device tier, distance,
            device tier again at equal distance, toolchain).
        tier: ``"exact"``, ``"arch"`` or ``"nearest"``.
        distance: log2 distance between the problems (0 for an exact bucket).
        reason: why, e.g. ``"exact device"`` or ``"nearest bucket M=1024 (log2 distance 1),
            exact device"``.
    """

    rank: tuple[Any, ...]
    tier: str
    distance: float
    reason: str


def nearness(tuned: Workload, workload: Workload) -> Nearness | None:
    """How well the configs tuned for ``tuned`` stand in for ``workload``: None when they
    never do (another kernel or source, another architecture, an incomparable problem)."""
    if tuned.kernel != workload.kernel:
        return None
    if workload.kernel_hash and tuned.kernel_hash and tuned.kernel_hash != workload.kernel_hash:
        return None
    want_dev, want_arch = target_device(workload.target), target_arch(workload.target)
    if want_arch is None and want_dev is None:
        if dict(tuned.target) != dict(workload.target):
            return None
        dev_tier = 0
    else:
        if target_arch(tuned.target) != want_arch:
            return None
        dev_tier = 0 if target_device(tuned.target) == want_dev else 1
    dist = _problem_distance(tuned.problem, workload.problem)
    if math.isinf(dist):
        return None
    toolchain = 0 if _toolchain(tuned.target) == _toolchain(workload.target) else 1
    where = ("exact device" if dev_tier == 0 else
             f"same arch {target_arch(tuned.target)} (tuned on {target_device(tuned.target)})")
    if dist == 0:
        tier, reason = ("exact" if dev_tier == 0 else "arch"), where
    else:
        near = ",".join(f"{k}={v}" for k, v in tuned.problem.items()
                        if workload.problem.get(k) != v)
        tier, reason = "nearest", f"nearest bucket {near} (log2 distance {dist:.3g}), {where}"
    if toolchain:
        reason += f", Triton {_toolchain(tuned.target)}"
    rank = (dist > 0, dev_tier if dist == 0 else 0, dist, dev_tier, toolchain)
    return Nearness(rank, tier, dist, reason)


def rank_workloads(tuned: Iterable[Workload], workload: Workload
                   ) -> list[tuple[Workload, Nearness]]:
    """The workloads of ``tuned`` whose configs may stand in for ``workload``, best first
    (the order :func:`resolve` uses; ties keep the given order)."""
    out = [(w, n) for w in tuned if (n := nearness(w, workload)) is not None]
    out.sort(key=lambda wn: wn[1].rank)  # stable
    return out


def resolve(packs: Sequence[Pack], workload: Workload) -> PackMatch | None:
    """The best entry over ``packs`` for ``workload``, or None (see the module docs)."""
    best: tuple[tuple[Any, ...], PackMatch] | None = None
    for pi, pack in enumerate(packs):
        for ei, e in enumerate(pack.entries):
            n = nearness(e.workload, workload)
            if n is None:
                continue
            rank = (*n.rank, pi, ei)
            if best is None or rank < best[0]:
                best = (rank, PackMatch(pack, e, n.tier, n.distance,
                                        f"pack {pack.label} {n.reason}"))
    return None if best is None else best[1]


# -- reading and verifying ---------------------------------------------------------------------


def _checksum(content: Mapping[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(canonical_json(content).encode("utf-8")).hexdigest()


def _plain(value: Any) -> Any:
    return json.loads(canonical_json(value))


def _scalar(v: Any) -> bool:
    if isinstance(v, float):
        return math.isfinite(v)
    return v is None or isinstance(v, (str, int, bool))


def _check_map(where: str, value: Any, *, lists: bool = False) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{where} is not an object")
    for k, v in value.items():
        ok = _scalar(v) or (lists and isinstance(v, list) and all(_scalar(x) for x in v))
        if not ok:
            raise ValueError(f"{where}.{k} is not a plain value ({type(v).__name__})")
    return value


def _number(where: str, v: Any, *, integer: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (
            integer and not isinstance(v, int)):
        raise ValueError(f"{where} is not {'an integer' if integer else 'a number'}")
    try:
        finite = math.isfinite(v)
    except OverflowError:  # an integer too large for a float
        finite = False
    if not finite or v < 0:
        raise ValueError(f"{where} is not a finite non-negative number")
    return v


def _string(where: str, v: Any, *, empty: bool = False) -> str:
    if not isinstance(v, str) or (not v and not empty):
        raise ValueError(f"{where} is not a {'' if empty else 'non-empty '}string")
    return v


def _entry(i: int, raw: Any) -> PackEntry:
    where = f"entries[{i}]"
    if not isinstance(raw, dict):
        raise ValueError(f"{where} is not an object")
    missing = _ENTRY_KEYS - raw.keys()
    if missing:
        raise ValueError(f"{where} lacks {sorted(missing)}")
    extra = raw.keys() - _ENTRY_KEYS
    if extra:
        raise ValueError(f"{where} has unknown fields {sorted(extra)}")
    stats = raw["stats"]
    if not isinstance(stats, dict) or set(stats) != set(_STATS_KEYS):
        raise ValueError(f"{where}.stats must hold exactly {list(_STATS_KEYS)}")
    s = {k: _number(f"{where}.stats.{k}", stats[k], integer=k == "repeats") for k in _STATS_KEYS}
    if s["repeats"] < 1:
        raise ValueError(f"{where}.stats.repeats is below 1")
    config = _check_map(f"{where}.config", raw["config"], lists=True)
    if not config:
        raise ValueError(f"{where}.config is empty")
    workload = Workload(
        _string(f"{where}.kernel", raw["kernel"]),
        _string(f"{where}.kernel_hash", raw["kernel_hash"], empty=True),
        _check_map(f"{where}.problem", raw["problem"], lists=True),
        _check_map(f"{where}.target", raw["target"]),
    )
    return PackEntry(
        workload, Config(config), float(s["median_ms"]), float(s["spread"]),
        int(s["repeats"]), float(s["min_ms"]), float(s["q1_ms"]), float(s["q3_ms"]),
        float(s["max_ms"]), int(_number(f"{where}.trials", raw["trials"], integer=True)),
        float(_number(f"{where}.measured_at", raw["measured_at"])),
    )


def pack_from_dict(doc: Any, source: str = "<pack>",
                   kernel_hashes: Mapping[str, str] | None = None,
                   trusted: Mapping[str, bytes] | None = None) -> Pack:
    """Verify a parsed pack document and build the :class:`Pack` (see :func:`load_pack`)."""
    def refuse(why: str, todo: str) -> PackError:
        return PackError(f"config pack {source} {why}; nothing of it was loaded: {todo}")

    if not isinstance(doc, dict) or doc.get("format") != PACK_FORMAT:
        raise refuse(f"is not a tunex config pack (no \"format\": \"{PACK_FORMAT}\")",
                     "pass a file written by `tunex pack export`")
    if too_deep(doc, _MAX_DEPTH):  # a pack nests a few levels; its checksum recurses
        raise refuse(f"is malformed (lists or objects nested over {_MAX_DEPTH} deep)",
                     "get a fresh copy from its publisher or re-export it")
    schema = doc.get("schema")
    if isinstance(schema, bool) or not isinstance(schema, int) or schema < 1:
        raise refuse(f"has no valid schema version ({schema!r})",
                     "get a fresh copy from its publisher or re-export it")
    if schema > PACK_SCHEMA:
        raise refuse(f"was written by a newer tunex (pack schema {schema}, this tunex reads "
                     f"up to {PACK_SCHEMA})", "upgrade tunex (pip install -U tunex)")
    checksum = doc.get("checksum")
    content = {k: v for k, v in doc.items() if k not in ("checksum", "signature")}
    if not isinstance(checksum, str) or checksum != _checksum(content):
        raise refuse("fails its checksum: it was modified or damaged after export",
                     "get a fresh copy from its publisher or re-export it with "
                     "`tunex pack export`; never edit a pack by hand")
    try:
        extra = doc.keys() - _TOP_KEYS
        if extra:
            raise ValueError(f"unknown top-level fields {sorted(extra)}")
        name = _string("name", doc.get("name"))
        version = _string("version", doc.get("version"))
        created = _string("created_at", doc.get("created_at"), empty=True)
        provenance = doc.get("provenance")
        if not isinstance(provenance, dict):
            raise ValueError("provenance is not an object")
        raw_entries = doc.get("entries")
        if not isinstance(raw_entries, list):
            raise ValueError("entries is not a list")
        entries = tuple(_entry(i, e) for i, e in enumerate(raw_entries))
        seen: set[Workload] = set()
        for e in entries:
            if e.workload in seen:
                raise ValueError(f"workload {e.workload.key} appears twice")
            seen.add(e.workload)
    except (ValueError, TypeError) as exc:
        raise refuse(f"is malformed ({exc})",
                     "get a fresh copy from its publisher or re-export it") from None
    signature = _check_signature(doc.get("signature"), content, trusted, refuse)
    pack = Pack(name, version, entries, provenance, created, checksum, source, signature,
                None if trusted is None else True)
    if kernel_hashes:
        _check_kernels(pack, kernel_hashes)
    return pack


# -- signatures --------------------------------------------------------------------------------


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise PackError(f"pack signatures need the cryptography package ({exc}): "
                        "pip install cryptography") from exc
    return ed25519


def _key_id(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()[:16]


def _signed_bytes(content: Mapping[str, Any]) -> bytes:
    return canonical_json(content).encode("utf-8")


_P25519 = 2**255 - 19
#: y-coordinates of the Ed25519 points of small order (1, 2, 4 and 8; either sign of x). A
#: public key among them (or a non-canonical y) "verifies" forged signatures of many messages
#: (the all-zero key and signature pass for about one in eight): refused as a key.
_SMALL_ORDER_Y = frozenset([0, 1, _P25519 - 1] + [
    int.from_bytes(bytes.fromhex(h), "little") for h in (
        "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
        "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a")])


def _weak_key(raw: bytes) -> bool:
    """Whether the 32-byte Ed25519 public key ``raw`` is of small order or not canonical."""
    y = int.from_bytes(raw, "little") & ((1 << 255) - 1)
    return y >= _P25519 or y in _SMALL_ORDER_Y


def _check_signature(block: Any, content: Mapping[str, Any], trusted: Mapping[str, bytes] | None,
                     refuse: Any) -> dict[str, str] | None:
    """The signature block once checked; refuse an unusable or untrusted one, and an unsigned
    pack where keys are trusted."""
    if block is None:
        if trusted is not None:
            raise refuse("is not signed, and this loader only accepts packs signed by a "
                         f"trusted key ({', '.join(sorted(trusted)) or 'none configured'})",
                         "ask its publisher for a signed pack, or load it without trusted keys")
        return None
    if (not isinstance(block, dict) or block.keys() != _SIGNATURE_KEYS
            or not all(isinstance(v, str) for v in block.values())
            or block["algorithm"] != "ed25519"):
        raise refuse("has a malformed signature (want algorithm ed25519, key, public_key, "
                     "value)", "get a fresh copy from its publisher")
    ed25519 = _crypto()
    import base64
    import binascii

    from cryptography.exceptions import InvalidSignature

    try:
        raw = base64.b64decode(block["public_key"], validate=True)
        sig = base64.b64decode(block["value"], validate=True)
        if _key_id(raw) != block["key"]:
            raise InvalidSignature("the key id does not match the public key")
        if len(raw) != 32 or _weak_key(raw):
            raise InvalidSignature("a public key of small order signs nothing")
        ed25519.Ed25519PublicKey.from_public_bytes(raw).verify(sig, _signed_bytes(content))
    except (binascii.Error, ValueError, InvalidSignature):
        raise refuse(f"fails its signature (key {block['key']}): it was modified after "
                     "signing, or the signature was forged",
                     "get a fresh copy from its publisher") from None
    if trusted is not None and trusted.get(block["key"]) != raw:
        raise refuse(f"is signed by key {block['key']}, which is not among the trusted keys "
                     f"({', '.join(sorted(trusted)) or 'none configured'})",
                     f"add its publisher's public key to {TRUSTED_KEYS_ENV} if you trust it")
    return dict(block)


def generate_key(path: str | os.PathLike[str]) -> str:
    """Write a new Ed25519 signing key to ``path`` (private, mode 0600) and its public key to
    ``path.pub`` (one line, to hand to users); return the key id."""
    import base64

    from cryptography.hazmat.primitives import serialization

    ed25519 = _crypto()
    key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    raw = key.public_key().public_bytes(serialization.Encoding.Raw,
                                        serialization.PublicFormat.Raw)
    target = Path(os.fspath(path))
    public = Path(f"{target}.pub")
    for existing in (target, public):  # neither a key nor a trusted .pub beside it is replaced
        if os.path.lexists(existing):
            raise PackError(f"{existing} exists: tunex never overwrites a key; pick another "
                            "path")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with os.fdopen(os.open(target, flags, 0o600), "wb") as f:
            f.write(private)
        with os.fdopen(os.open(public, flags, 0o644), "w") as g:
            g.write(f"ed25519 {base64.b64encode(raw).decode()} tunex-pack-key-{_key_id(raw)}\n")
    except FileExistsError:  # created meanwhile
        raise PackError(f"{target} or its .pub exists: tunex never overwrites a key; pick "
                        "another path") from None
    except OSError as exc:
        raise PackError(f"cannot write signing key {target} ({exc})") from exc
    return _key_id(raw)


def _private_key(path: str | os.PathLike[str]) -> Any:
    from cryptography.hazmat.primitives import serialization

    ed25519 = _crypto()
    try:
        key = serialization.load_pem_private_key(read_bounded(path, _MAX_KEY_BYTES), None)
    except (OSError, ValueError, TypeError) as exc:
        raise PackError(f"cannot read signing key {os.fspath(path)} ({_first(exc)}): pass the "
                        "private key file `tunex pack keygen` wrote (not its .pub)") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise PackError(f"{os.fspath(path)} is not an Ed25519 key: make one with "
                        "`tunex pack keygen`")
    return key


def _first(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def sign_pack(pack: Pack, key_path: str | os.PathLike[str]) -> Pack:
    """``pack`` signed with the private key at ``key_path`` (write it with :meth:`Pack.write`)."""
    import base64

    from cryptography.hazmat.primitives import serialization

    key = _private_key(key_path)
    raw = key.public_key().public_bytes(serialization.Encoding.Raw,
                                        serialization.PublicFormat.Raw)
    sig = key.sign(_signed_bytes(pack.content()))
    block = {"algorithm": "ed25519", "key": _key_id(raw),
             "public_key": base64.b64encode(raw).decode(), "value": base64.b64encode(sig).decode()}
    return dataclasses.replace(pack, signature=block)


def trusted_keys(sources: Iterable[str | os.PathLike[str]] | str | os.PathLike[str] | None = None
                 ) -> dict[str, bytes] | None:
    """The public keys a loader trusts, by key id: from ``sources`` (``.pub`` files, folders of
    them, or ``ed25519 <base64>`` lines; one of them, or several), else from
    ``$TUNEX_TRUSTED_KEYS``; None where neither names any (then unsigned packs load)."""
    if sources is None:
        env = os.environ.get(TRUSTED_KEYS_ENV, "").strip()
        if not env:
            return None
        sources = [p for p in env.split(os.pathsep) if p.strip()]
    elif isinstance(sources, (str, os.PathLike)):  # one key file or folder, not its letters
        sources = [sources]
    import base64
    import binascii

    keys: dict[str, bytes] = {}
    for src in sources:
        text = os.fspath(src)
        if text.startswith("ed25519 "):
            lines = [(text, "<key>")]
        else:
            path = Path(text)
            files = sorted(path.glob("*.pub")) if path.is_dir() else [path]
            try:
                lines = [(line, str(f)) for f in files
                         for line in read_bounded(f, _MAX_KEY_BYTES).decode("utf-8").splitlines()
                         if line.strip()]
            except (OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
                raise PackError(f"cannot read trusted key {text} ({exc}): fix "
                                f"{TRUSTED_KEYS_ENV} or the path given") from None
        for line, where in lines:
            parts = line.split()
            try:
                if len(parts) < 2 or parts[0] != "ed25519":
                    raise ValueError("not an 'ed25519 <base64>' line")
                raw = base64.b64decode(parts[1], validate=True)
                if len(raw) != 32:
                    raise ValueError("an Ed25519 public key has 32 bytes")
                if _weak_key(raw):
                    raise ValueError("a key of small order, which 'verifies' forged signatures")
            except (ValueError, binascii.Error) as exc:
                raise PackError(f"trusted key {where} is malformed ({exc}): pass the .pub file "
                                "`tunex pack keygen` wrote") from None
            keys[_key_id(raw)] = raw
    return keys


def _check_kernels(pack: Pack, kernel_hashes: Mapping[str, str]) -> None:
    held = pack.kernels()
    for kernel, want in kernel_hashes.items():
        hashes = held.get(kernel)
        if hashes and want and want not in hashes:
            raise PackError(
                f"config pack {pack.source or pack.label} is incompatible: it holds configs for "
                f"kernel {kernel!r} with source hash {sorted(hashes)}, but this kernel's source "
                f"hash is {want!r} (the kernel changed since the pack was made); nothing of it "
                "was loaded: re-tune the kernel and export a new pack"
            )


def load_pack(path: str | os.PathLike[str],
              kernel_hashes: Mapping[str, str] | None = None, *,
              trusted: Iterable[str | os.PathLike[str]] | str | os.PathLike[str]
              | Mapping[str, bytes] | None = None) -> Pack:
    """Read and verify a pack; raise :class:`~tunex.errors.PackError` if it is unusable.

    Refused, with a message saying what to do: a file that cannot be read or is not JSON, a
    document that is not a tunex pack, one written by a newer tunex (newer schema), one whose
    checksum does not match its content (tampered with or damaged), one with a missing or
    ill-typed field, and, when ``kernel_hashes`` (kernel name -> source hash) is given, one
    whose configs for such a kernel were made for another version of its source.

    ``trusted``: public keys (see :func:`trusted_keys`; default ``$TUNEX_TRUSTED_KEYS``).
    Where any are configured, a pack that is not signed by one of them is refused; a signed
    pack's signature is checked in any case.

    The file is parsed as JSON and its values checked; nothing in it is executed.
    """
    keys = trusted if isinstance(trusted, Mapping) else trusted_keys(trusted)
    name = os.fspath(path)
    try:
        text = read_bounded(name, _MAX_BYTES).decode("utf-8")
    except ValueError as exc:  # not a regular file, or too large (UnicodeDecodeError too)
        raise PackError(f"config pack {name} cannot be loaded ({exc}); nothing of it was "
                        "loaded: pass a file written by `tunex pack export`") from None
    except OSError as exc:
        raise PackError(f"cannot read config pack {name} ({exc}): check the path") from exc
    try:
        doc = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_unique_keys)
    except (ValueError, RecursionError) as exc:
        raise PackError(f"config pack {name} is not valid JSON ({exc}); nothing of it was "
                        "loaded: get a fresh copy from its publisher or re-export it") from None
    return pack_from_dict(doc, name, kernel_hashes, keys)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object without repeated keys: with one, what a reader sees depends on the
    parser (the checksummed text and the loaded pack could disagree)."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"key {k!r} appears twice in one object")
        out[k] = v
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in a pack")


# -- export and import -------------------------------------------------------------------------


def _provenance(entries: Sequence[PackEntry], facts: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    from tunex import __version__

    tritons = sorted({str(t) for e in entries
                      if (t := _toolchain(e.workload.target)) is not None})
    cudas = sorted({str(f["cuda"]) for f in facts if f.get("cuda")}
                   | {str(e.workload.target["cuda"]) for e in entries
                      if e.workload.target.get("cuda")})
    devices = []
    seen = set()
    for e in entries:
        d = (target_device(e.workload.target), target_arch(e.workload.target))
        if d not in seen:
            seen.add(d)
            devices.append({"device": d[0], "arch": d[1]})
    return {"tunex": __version__, "triton": tritons, "cuda": cudas, "devices": devices}


def export_pack(db: Any, path: str | os.PathLike[str], *, kernel: str | None = None,
                name: str, version: str, sign_with: str | os.PathLike[str] | None = None
                ) -> Pack:
    """Write the best config of every workload in ``db`` (of ``kernel`` when given) to a pack.

    Args:
        db: a :class:`~tunex.db.Database`.
        path: the pack file to write (atomically).
        kernel: only this kernel's workloads.
        name, version: the pack's name and version (e.g. your library's).
        sign_with: the publisher's private key (:func:`generate_key`) to sign the pack with.

    Returns the pack written. Raises :class:`~tunex.errors.PackError` when there is nothing to
    export (no successful trial) or the file cannot be written.
    """
    if not all(isinstance(v, str) and v.strip() and v.isprintable() for v in (name, version)):
        raise PackError(f"a pack needs a name and a version as text on one line (e.g. "
                        f"name='mylib', version='1.2'), not {name!r} and {version!r}")
    best = db.best_per_workload(kernel)
    if not best:
        what = f"kernel {kernel!r}" if kernel else "any kernel"
        raise PackError(f"{db!r} holds no successful trial of {what}: nothing to export; "
                        "tune first (tunex search, or @tunex.autotune with mode='on_miss')")
    entries: list[PackEntry] = []
    facts = []
    for w, m in best:
        entry = PackEntry.from_measurement(w, m, db.count(w))
        try:  # what load_pack refuses (a NaN key value) would make the whole pack unusable
            _entry(0, _plain(entry.to_dict()))
        except ValueError as exc:
            log.warning("pack %s-%s: workload %s (%s %s) left out: a pack cannot hold it (%s)",
                        name, version, w.digest, w.kernel, dict(w.problem),
                        str(exc).removeprefix("entries[0]."))
            continue
        entries.append(entry)
        facts.append(m.facts)
    if not entries:
        raise PackError(f"{db!r} holds no workload a pack can hold (see the warnings): nothing "
                        "to export")
    now = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0)
    pack = Pack(str(name), str(version), tuple(entries),
                _provenance(entries, facts),
                now.isoformat().replace("+00:00", "Z"))
    if sign_with is not None:
        pack = sign_pack(pack, sign_with)
    return pack.write(path)


def import_pack(db: Any, path: str | os.PathLike[str],
                kernel_hashes: Mapping[str, str] | None = None, *,
                trusted: Iterable[str | os.PathLike[str]] | str | os.PathLike[str]
                | Mapping[str, bytes] | None = None) -> int:
    """Verify a pack and add its entries to ``db`` as trials; return how many were new.

    All or nothing: the pack is verified whole first (see :func:`load_pack`), then written in
    one transaction. Each entry becomes an ok trial of its workload with strategy
    ``"pack:NAME-VERSION"`` whose median and spread are the entry's; importing the same pack
    twice adds nothing the second time, nor does an entry whose config its workload has
    measured already (a pack imported into the database it came from: a config is measured
    once per workload).
    """
    pack = load_pack(path, kernel_hashes, trusted=trusted)
    label = pack.label
    records = []
    for e in pack.entries:
        m = e.measurement(label)
        if any(t.ok and t.config == m.config for t in db.measurements(e.workload)):
            continue
        records.append({
            "workload_spec": e.workload.to_dict(), "config": m.config.to_dict(),
            "status": m.status.value, "times_ms": list(m.times_ms), "facts": dict(m.facts),
            "strategy": f"pack:{label}", "started_at": m.started_at, "ended_at": m.ended_at,
            "compile_ms": None, "worker": None, "error": None,
        })
    if not records:
        return 0
    document = io.StringIO(json.dumps(records))
    document.name = f"config pack {os.fspath(path)}"  # what a refusal names (not "<file>")
    return int(db.import_trials(document))
