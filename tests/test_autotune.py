"""@tunex.autotune: dispatch, keys and buckets, modes, listeners, triton.autotune drop-in,
failures, packs and the cost model at runtime.

CPU tests run the kernels under Triton's interpreter: kernels are jitted with TRITON_INTERPRET=1
set only while ``triton.jit`` runs (see ``jit``), so other test modules are not affected. Tests
marked ``gpu`` run compiled kernels on CUDA and are skipped without one.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

import tunex  # noqa: E402
from tunex.db import Database, export_pack  # noqa: E402
from tunex.decorator import Selection, add_listener, clear_packs, load_packs, remove_listener  # noqa: E402
from tunex.errors import ConfigError, PackError  # noqa: E402
from tunex.space import Choice, Int, Pow2, Space  # noqa: E402
from tunex.trial import Config, Measurement, Status  # noqa: E402

HAS_GPU = torch.cuda.is_available()
gpu = pytest.mark.gpu


def jit(fn: Callable[..., Any], interpret: bool = True) -> Any:
    """``triton.jit(fn)``, under the interpreter unless ``interpret`` is false."""
    old = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1" if interpret else "0"
    try:
        return triton.jit(fn)
    finally:
        if old is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = old


# -- kernels (plain functions; jitted per test) ------------------------------------------------


def add_kernel(x, y, out, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    tl.static_assert(BLOCK <= 4096)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


def accumulate_kernel(x, out, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.atomic_add(out + offs, tl.load(x + offs, mask=m), mask=m)


def increment_kernel(x, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(x + offs, tl.load(x + offs, mask=m) + 1.0, mask=m)


def grid(n: int) -> Callable[[dict[str, Any]], tuple[int]]:
    return lambda meta: (triton.cdiv(n, meta["BLOCK"]),)


CONFIGS = [triton.Config({"BLOCK": 32}, num_warps=1), triton.Config({"BLOCK": 64}, num_warps=2),
           triton.Config({"BLOCK": 128}, num_warps=4)]
SPEED = {32: 3.0, 64: 1.0, 128: 2.0, 256: 2.5, 512: 4.0, 1024: 5.0, 48: 0.1, 8192: 0.1}


class FakeBench:
    """Deterministic timings by BLOCK; runs the kernel once per config (hooks included)."""

    def __init__(self) -> None:
        self.calls: list[Config] = []

    def __call__(self, call: Callable[[], Any], config: Config) -> list[float]:
        call()
        self.calls.append(config)
        base = SPEED[config["BLOCK"]]
        return [base, base * 1.01, base * 0.99]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for var in ("TUNEX_MODE", "TUNEX_PACKS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TUNEX_DB", str(tmp_path / "default.db"))
    clear_packs()
    yield
    clear_packs()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "tunex.db"


def data(n: int) -> tuple[Any, Any, Any]:
    g = torch.Generator().manual_seed(n)
    return torch.randn(n, generator=g), torch.randn(n, generator=g), torch.empty(n)


def make_add(db_path: Path, **options: Any) -> tuple[Any, FakeBench]:
    bench = FakeBench()
    opts: dict[str, Any] = {"configs": CONFIGS, "key": {"n": "pow2"}, "db": str(db_path),
                            "bench": bench, "remeasure": 0}  # test_close_leaders_... has it
    opts.update(options)
    return tunex.autotune(**opts)(jit(add_kernel)), bench


def call_add(kernel: Any, n: int) -> None:
    x, y, out = data(n)
    kernel[grid(n)](x, y, out, n)
    torch.testing.assert_close(out, x + y)


# -- API shape ---------------------------------------------------------------------------------


def test_import_paths() -> None:
    import inspect

    import tunex.decorator._tune
    from tunex.decorator import autotune

    # a plain function, the same one however it was reached
    assert inspect.isfunction(tunex.autotune) and tunex.autotune is autotune
    assert tunex.autotune.add_listener is add_listener  # type: ignore[attr-defined]
    assert tunex.bucket.pow2(1000) == 1024  # type: ignore[attr-defined]
    assert tunex.autotune.bucket.multiple(64)(100) == 128  # type: ignore[attr-defined]


@pytest.mark.parametrize("options, match", [
    ({"configs": CONFIGS, "space": Space([Pow2("BLOCK", 32, 64)])}, "either"),
    ({}, "either"),
    ({"configs": CONFIGS, "key": ["m"]}, "not an argument"),
    ({"configs": CONFIGS, "mode": "sometimes"}, "unknown autotune mode"),
    ({"space": Space([Pow2("BLOCKX", 32, 64)])}, "neither constexpr"),
    ({"configs": CONFIGS, "reset_to_zero": ["nope"]}, "not an argument"),
    ({"configs": CONFIGS, "key": {"n": "pow3"}}, "unknown bucket"),
])
def test_decoration_errors(options: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        tunex.autotune(**options)(jit(add_kernel))


# -- dispatch, keys, buckets -------------------------------------------------------------------


def test_never_mode_uses_default_and_creates_no_db(db_path: Path) -> None:
    k, bench = make_add(db_path)
    call_add(k, 1000)
    assert k.last.source == "default" and k.last.config["BLOCK"] == 32
    assert k.tunings == 0 and bench.calls == [] and not db_path.exists()


def test_never_mode_takes_the_nearest_tuned_shape_from_the_database(db_path: Path) -> None:
    """A shape nothing was tuned for gets the best config of the nearest tuned shape of the
    same kernel source on the same device, not the default; never another source's."""
    def favouring(block: int) -> Callable[[Callable[[], Any], Config], list[float]]:
        return lambda call, config: [1.0 if config["BLOCK"] == block else 2.0]

    small, _ = make_add(db_path, mode="on_miss", bench=favouring(32))
    call_add(small, 100)  # bucket 128
    large, _ = make_add(db_path, mode="on_miss", bench=favouring(128))
    call_add(large, 4000)  # bucket 4096
    k, bench = make_add(db_path)
    call_add(k, 1000)  # bucket 1024: 2 octaves from 4096, 3 from 128
    assert k.last.source == "db" and k.last.config["BLOCK"] == 128 and bench.calls == []
    assert "nearest tuned workload" in k.last.reason and "4096" in k.last.reason
    call_add(k, 200)  # bucket 256: nearer 128
    assert k.last.source == "db" and k.last.config["BLOCK"] == 32
    edited, _ = make_add(db_path)
    edited.kernel_hash = "0" * 16  # another version of the kernel's source
    call_add(edited, 1000)
    assert edited.last.source == "default"


def test_same_bucket_does_not_retune(db_path: Path) -> None:
    k, bench = make_add(db_path, mode="on_miss")
    call_add(k, 1000)
    assert k.tunings == 1 and len(bench.calls) == 3
    assert k.last.source == "tuned" and k.last.config["BLOCK"] == 64
    assert k.last.workload.problem["n"] == 1024
    call_add(k, 1000)
    call_add(k, 600)  # same pow2 bucket (1024)
    assert k.tunings == 1 and len(bench.calls) == 3
    assert k.last.source == "cache" and k.last.config["BLOCK"] == 64
    call_add(k, 2000)  # new bucket
    assert k.tunings == 2 and k.last.workload.problem["n"] == 2048


def test_exact_keys_retune_per_value(db_path: Path) -> None:
    k, _ = make_add(db_path, mode="on_miss", key=["n"])
    call_add(k, 1000)
    call_add(k, 999)
    assert k.tunings == 2


def test_bucket_argument_with_list_key(db_path: Path) -> None:
    k, _ = make_add(db_path, mode="on_miss", key=["n"], bucket={"n": tunex.bucket.pow2})  # type: ignore[attr-defined]
    call_add(k, 1000)
    call_add(k, 700)
    assert k.tunings == 1


def test_a_float_key_equal_to_an_int_is_that_int(db_path: Path) -> None:
    # n=100.0 and n=100 share one entry of the launch cache: n=100.0 made its own workload
    # (not bucketed, no database row: the default), which every later n=100 call then used
    tuner, _ = make_add(db_path, mode="on_miss")
    call_add(tuner, 100)
    k, _ = make_add(db_path)
    x, y, out = data(100)
    k[grid(100)](x, y, out, 100.0)
    assert k.last.source == "db" and k.last.config == tuner.last.config
    assert k.last.workload == tuner.last.workload and k.last.key == {"n": 100}
    call_add(k, 100)
    assert k.last.config == tuner.last.config


def test_dtype_is_part_of_the_key(db_path: Path) -> None:
    k, _ = make_add(db_path, mode="on_miss")
    call_add(k, 256)
    x, y, out = (t.double() for t in data(256))
    k[grid(256)](x, y, out, 256)
    assert k.tunings == 2 and k.last.workload.problem["x.dtype"] == "float64"


def test_hot_path_does_no_io_and_no_resolution(db_path: Path, monkeypatch) -> None:
    k, _ = make_add(db_path, mode="on_miss")
    call_add(k, 512)
    from tunex.decorator import _runtime

    def boom(*a: Any, **kw: Any) -> None:
        raise AssertionError("the hot path must not touch the database")

    monkeypatch.setattr(_runtime, "open_db", boom)
    monkeypatch.setattr(k, "_resolve", boom)
    x, y, out = data(512)
    for _ in range(3):
        k[grid(512)](x, y, out, 512)
    torch.testing.assert_close(out, x + y)


def test_call_patterns_keyword_and_positional(db_path: Path) -> None:
    k, _ = make_add(db_path, mode="on_miss")
    x, y, out = data(300)
    k[grid(300)](x, y, out, n=300)
    k[grid(300)](x, y, out, 300)
    k[grid(300)](x=x, y=y, out=out, n=300)
    torch.testing.assert_close(out, x + y)
    assert k.tunings == 1


def test_passing_a_tuned_parameter_is_an_error(db_path: Path) -> None:
    k, _ = make_add(db_path)
    x, y, out = data(64)
    with pytest.raises(ConfigError, match="tuned by @tunex"):
        k[grid(64)](x, y, out, 64, BLOCK=32)


def test_a_call_missing_an_argument_is_refused_before_anything_is_tuned(db_path: Path) -> None:
    # it was tuned (every trial failing, recorded under n=None) and its decision kept before
    # the launch said what was missing
    k, bench = make_add(db_path, mode="on_miss")
    x, y, out = data(300)
    with pytest.raises(TypeError, match=r"missing .*'n'"):
        k[grid(300)](x, y, out)
    assert k.tunings == 0 and k.last is None and bench.calls == [] and not db_path.exists()
    call_add(k, 300)  # the same pattern, called right, resolves and launches
    assert k.last.source == "tuned" and k.last.key == {"n": 300}


# -- modes -------------------------------------------------------------------------------------


def test_never_mode_reads_the_database(db_path: Path) -> None:
    tuner, _ = make_add(db_path, mode="on_miss")
    call_add(tuner, 1000)
    k, bench = make_add(db_path)  # a new process, in effect
    call_add(k, 1000)
    assert k.last.source == "db" and k.last.config["BLOCK"] == 64 and bench.calls == []
    assert k.last.time_ms == pytest.approx(1.0)


def test_env_mode_overrides_decorator(db_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TUNEX_MODE", "on_miss")
    k, _ = make_add(db_path, mode="never")
    call_add(k, 100)
    assert k.tunings == 1 and k.last.mode == "on_miss"
    monkeypatch.setenv("TUNEX_MODE", " Pinned ")  # as a shell may leave it
    k3, _ = make_add(db_path, mode="on_miss")
    call_add(k3, 300)
    assert k3.tunings == 0 and k3.last.mode == "pinned"


def test_an_env_mode_that_names_no_mode_is_warned_about_not_raised(db_path: Path, monkeypatch,
                                                                   caplog) -> None:
    """A typo in TUNEX_MODE made every launch of every decorated kernel raise; an environment
    setting never makes a launch raise (as a bad TUNEX_PACKS): the decorator's mode stands."""
    monkeypatch.setenv("TUNEX_MODE", "bogus")
    k2, _ = make_add(db_path)
    with caplog.at_level(logging.WARNING, "tunex.autotune"):
        call_add(k2, 100)
        call_add(k2, 200)
    assert k2.last.mode == "never" and k2.tunings == 0
    assert caplog.text.count("TUNEX_MODE='bogus' is not a mode") == 1
    with pytest.raises(ConfigError, match="unknown autotune mode 'sometimes'"):
        call_add(make_add(db_path, mode="sometimes")[0], 100)


def test_pinned_mode_never_tunes(db_path: Path, caplog) -> None:
    k, bench = make_add(db_path, mode="pinned")
    with caplog.at_level(logging.WARNING, "tunex.autotune"):
        call_add(k, 1000)
    assert k.last.source == "default" and k.tunings == 0 and bench.calls == []
    assert "pinned: no database row or pack" in caplog.text
    tuner, _ = make_add(db_path, mode="on_miss")
    call_add(tuner, 1000)
    ranks = [make_add(db_path, mode="pinned")[0] for _ in range(3)]
    for r in ranks:
        call_add(r, 1000)
    assert {r.last.config["BLOCK"] for r in ranks} == {64}
    assert {r.last.source for r in ranks} == {"db"}


def test_each_new_workload_records_its_decision(db_path: Path) -> None:
    k, _ = make_add(db_path, mode="on_miss")
    call_add(k, 1000)
    tuned = k.last
    call_add(k, 600)  # same bucket: announced as "cache", not recorded again
    call_add(k, 1000)  # a known key: the hot path records nothing
    reader, _ = make_add(db_path)  # another process, in effect
    call_add(reader, 1000)
    pinned, _ = make_add(db_path, mode="pinned")
    call_add(pinned, 1000)  # pinned ranks only read the database
    assert pinned.last.source == "db"
    with Database(db_path) as d:
        first, second = d.decisions()
        trials = {t.measurement.config: t.number for t in d.trials(tuned.workload)}
    assert (first.source, first.mode, first.detail) == ("tuned", "on_miss", tuned.reason)
    assert first.config == tuned.config and first.key == {"n": 1000}
    assert first.trial == trials[tuned.config] and first.time_ms == pytest.approx(1.0)
    assert first.seconds == pytest.approx(tuned.seconds) and first.workload == tuned.workload
    assert (second.source, second.mode, second.trial) == ("db", "never", first.trial)
    assert second.detail == reader.last.reason and second.config == tuned.config


def test_a_database_that_cannot_record_decisions_only_warns(db_path: Path, monkeypatch,
                                                           caplog) -> None:
    from tunex.decorator import _runtime
    from tunex.errors import DatabaseError

    tuner, _ = make_add(db_path, mode="on_miss")
    call_add(tuner, 1000)
    monkeypatch.setattr(_runtime, "_unwritable", set())
    tried: list[str] = []

    def refuse(self: Database, workload: Any, config: Config, source: str, **kw: Any) -> None:
        tried.append(source)
        raise DatabaseError(f"cannot record a decision in tuning database {self!r}: disk full")

    monkeypatch.setattr(Database, "record_decision", refuse)
    k, _ = make_add(db_path)
    with caplog.at_level(logging.WARNING, "tunex.autotune"):
        call_add(k, 1000)
        call_add(k, 3000)  # another workload: not tried again, not warned again
    assert k.last.source == "db" and "nearest tuned workload" in k.last.reason  # 1024's best
    assert tried == ["db"]
    warned = [r.message for r in caplog.records if "cannot record the decision" in r.message]
    assert len(warned) == 1 and "disk full" in warned[0]
    with Database(db_path) as d:  # read-only: not even tried
        d.readonly = True
        ro, _ = make_add(db_path, db=d)
        call_add(ro, 1000)
        assert ro.last.source == "db" and tried == ["db"]


def test_on_miss_resumes_and_uses_db_row(db_path: Path) -> None:
    k, _ = make_add(db_path, mode="on_miss")
    call_add(k, 1000)
    k2, bench2 = make_add(db_path, mode="on_miss")
    call_add(k2, 1000)
    assert k2.tunings == 0 and k2.last.source == "db" and bench2.calls == []


RESUME_SPACE = Space([Pow2("BLOCK", 32, 1024), Choice("num_warps", [1, 2, 4])])


def make_spaced(db_path: Path, bench: Any) -> Any:
    return tunex.autotune(space=RESUME_SPACE, key={"n": "pow2"}, mode="on_miss",
                          budget="12trials", strategy="random", seed=0, db=str(db_path),
                          bench=bench, remeasure=0)(jit(add_kernel))


def sources(db_path: Path) -> list[str]:
    with Database(db_path) as d:
        return [x.source for x in d.decisions(begun=True)]


def test_a_tuning_cut_short_by_ctrl_c_stops_the_program_and_the_next_miss_resumes_it(
        db_path: Path) -> None:
    seen: list[Config] = []

    def interrupted(call: Callable[[], Any], config: Config) -> list[float]:
        if len(seen) == 3:
            raise KeyboardInterrupt
        seen.append(config)
        return FakeBench()(call, config)

    with pytest.raises(KeyboardInterrupt, match="interrupted after 3 trials"):
        call_add(make_spaced(db_path, interrupted), 3000)
    assert sources(db_path) == ["tuning"]  # begun, never ended
    bench = FakeBench()
    k = make_spaced(db_path, bench)  # the same process, as a notebook would go on
    call_add(k, 3000)
    assert k.tunings == 1 and k.last.source == "tuned"
    assert not set(bench.calls) & set(seen) and len(bench.calls) == 9  # 12 in all, none twice
    with Database(db_path) as d:
        (w,) = d.workloads()
        assert d.count(w) == 12
    assert sources(db_path) == ["tuning", "tuning", "tuned"]
    again = FakeBench()
    k3 = make_spaced(db_path, again)
    call_add(k3, 3000)  # finished: the database's best, not tuned again
    assert k3.tunings == 0 and k3.last.source == "db" and again.calls == []


CHILD = """
import os, sys
os.environ["TRITON_INTERPRET"] = "1"
import torch, triton, triton.language as tl, tunex
from tunex.space import Choice, Pow2, Space

@triton.jit
def add_kernel(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)

calls = []
def bench(call, config):
    if len(calls) == int(sys.argv[2]):
        os._exit(3)  # as a kill would: nothing more is written
    call()
    calls.append(config)
    return [float(config["BLOCK"])]

space = Space([Pow2("BLOCK", 32, 1024), Choice("num_warps", [1, 2, 4])])
k = tunex.autotune(space=space, key={"n": "pow2"}, mode="on_miss", budget="12trials",
                   strategy="random", seed=0, db=sys.argv[1], bench=bench, remeasure=0)(add_kernel)
n = 3000
x, y, out = torch.ones(n), torch.ones(n), torch.empty(n)
k[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n)
print(k.tunings, k.last.source, len(calls))
"""


def test_a_tuning_whose_process_was_killed_resumes_once_then_its_best_is_used(
        db_path: Path, tmp_path: Path) -> None:
    import subprocess
    import sys

    script = tmp_path / "child.py"
    script.write_text(CHILD)

    def child(kill_at: int) -> subprocess.CompletedProcess[str]:
        """The kernel called in a new process, which ends abruptly once ``kill_at`` configs
        are measured (-1: never)."""
        return subprocess.run([sys.executable, str(script), str(db_path), str(kill_at)],
                              capture_output=True, text=True, timeout=300)

    first = child(4)  # killed in its fifth measurement
    assert first.returncode == 3, first.stderr[-2000:]
    with Database(db_path) as d:
        (w,) = d.workloads()
        assert d.count(w) == 4
    second = child(2)  # resumes it (4 recorded, within the same 12), killed again 2 trials on
    assert second.returncode == 3, second.stderr[-2000:]
    with Database(db_path) as d:
        assert d.count(w) == 6
    assert sources(db_path) == ["tuning", "tuning"]
    third = child(-1)
    # cut short twice in a row: its best so far, no third try (a config may end the process)
    assert third.returncode == 0 and third.stdout.split() == ["0", "db", "0"], third.stderr
    assert "cut short 2 times in a row" in third.stderr


def test_trials_recorded_as_they_end(db_path: Path) -> None:
    seen: list[int] = []

    def bench(call: Callable[[], Any], config: Config) -> list[float]:
        with Database(db_path) as d:  # another reader sees earlier trials already
            seen.append(sum(d.count(w) for w in d.workloads()))
        call()
        return [SPEED[config["BLOCK"]]]

    k, _ = make_add(db_path, mode="on_miss", bench=bench)
    call_add(k, 100)
    assert seen == [0, 1, 2]


def test_space_mode_with_search_strategy_and_budget(db_path: Path) -> None:
    space = Space([Pow2("BLOCK", 32, 1024), Choice("num_warps", [1, 2, 4])])
    bench = FakeBench()
    k = tunex.autotune(space=space, key={"n": "pow2"}, mode="on_miss", budget="5trials",
                       strategy="random", db=str(db_path), bench=bench)(jit(add_kernel))
    call_add(k, 3000)
    with Database(db_path) as d:
        (w,) = d.workloads()
        trials = d.trials(w)
    assert len(trials) == 5 and all(t.strategy == "autotune:random" for t in trials)
    assert trials[0].measurement.config == space.default()  # the default is measured first
    assert k.last.source == "tuned" and "over default" in k.last.reason


def test_space_problem_sizes_come_from_the_key(db_path: Path) -> None:
    space = Space([Pow2("BLOCK", 32, 1024)], ["BLOCK <= n"], problem=["n"])
    bench = FakeBench()
    k = tunex.autotune(space=space, key={"n": "pow2"}, mode="on_miss", db=str(db_path),
                       bench=bench)(jit(add_kernel))
    call_add(k, 100)  # bucket 128: BLOCK in 32..128
    assert {c["BLOCK"] for c in bench.calls} == {32, 64, 128}


def test_problem_and_bind_options_name_the_workload_and_bind_the_space(db_path: Path) -> None:
    # as the library kernels use them: the workload's problem is the kernel's own key, and the
    # space reads a derived value; the dispatch cache is still keyed on n and the dtypes
    binds: list[Any] = []

    def problem(named: Any) -> dict[str, Any]:
        return {"size": tunex.bucket.pow2(named["n"]), "dtype": str(named["x"].dtype)[6:]}

    def bind(space: Space, workload: Any) -> Space:
        binds.append(dict(workload.problem))
        return space.bind(LIMIT=workload.problem["size"] // 2)

    space = Space([Pow2("BLOCK", 32, 1024)], ["BLOCK <= LIMIT"], problem=["LIMIT"])
    bench = FakeBench()
    k = tunex.autotune(space=space, key=["n"], problem=problem, bind=bind, mode="on_miss",
                       db=str(db_path), bench=bench)(jit(add_kernel))
    call_add(k, 200)  # size 256: BLOCK in 32..128
    assert k.last.workload.problem == {"size": 256, "dtype": "float32"}
    assert k.last.key == {"n": 200} and k.last.source == "tuned"
    assert {c["BLOCK"] for c in bench.calls} == {32, 64, 128}
    call_add(k, 150)  # the same workload: resolved from the process, bound once
    assert k.last.source == "cache" and binds == [{"size": 256, "dtype": "float32"}]
    call_add(k, 200)  # known raw key: the hot path
    assert k.tunings == 1


def test_budget_in_seconds(db_path: Path) -> None:
    def slow(call: Callable[[], Any], config: Config) -> list[float]:
        time.sleep(0.3)
        return [SPEED[config["BLOCK"]]]

    k, _ = make_add(db_path, mode="on_miss", budget="0.5s", bench=slow)
    call_add(k, 100)
    with Database(db_path) as d:
        # the budget (set-up included) has room for two 0.3 s trials at most, one on a busy
        # machine; without it every config of the space would be measured
        assert 1 <= d.count(d.workloads()[0]) <= 2 < len(CONFIGS)


def test_a_time_budget_bounds_the_whole_first_call(db_path: Path) -> None:
    # the set-up before the first trial (here a slow early_config_prune) is paid from the time
    # budget: the call that missed returns after about the budget, not the budget plus set-up
    def slow(call: Callable[[], Any], config: Config) -> list[float]:
        time.sleep(0.1)
        return [SPEED.get(config["BLOCK"], 1.0)]

    def prune(configs: list[Any], named: Any, **kw: Any) -> list[Any]:
        time.sleep(0.8)
        return configs

    many = [triton.Config({"BLOCK": b}, num_warps=w) for b in (32, 64, 128, 256, 512, 1024)
            for w in (1, 2, 4, 8)]
    k, _ = make_add(db_path, mode="on_miss", budget="1.2s", bench=slow, configs=many,
                    prune_configs_by={"early_config_prune": prune})
    call_add(k, 100)
    with Database(db_path) as d:
        trials = d.count(d.workloads()[0])
    assert "time budget" in k.last.reason
    assert 1 <= trials <= 5  # 0.4 s left of the budget at 0.1 s a trial (not 1.2 s worth)


# -- failures ----------------------------------------------------------------------------------


def test_failing_configs_are_recorded_and_search_goes_on(db_path: Path) -> None:
    configs = [triton.Config({"BLOCK": 48}), triton.Config({"BLOCK": 128}),  # 48: not a power of 2
               triton.Config({"BLOCK": 8192})]  # static_assert fails
    k, _ = make_add(db_path, mode="on_miss", configs=configs)
    call_add(k, 500)
    assert k.last.config["BLOCK"] == 128 and k.last.source == "tuned"
    assert "2 failed" in k.last.reason and "default config failed" in k.last.reason
    with Database(db_path) as d:
        ms = {m.config["BLOCK"]: m for m in d.measurements(d.workloads()[0])}
    assert {b: m.status for b, m in ms.items()} == {
        48: Status.RUNTIME_ERROR, 128: Status.OK, 8192: Status.RUNTIME_ERROR}
    assert "power of 2" in (ms[48].error or "")


def test_all_configs_failing_falls_back_to_default(db_path: Path, caplog) -> None:
    def broken(call: Callable[[], Any], config: Config) -> list[float]:
        raise RuntimeError("out of resources")

    k, _ = make_add(db_path, mode="on_miss", bench=broken)
    with caplog.at_level(logging.WARNING, "tunex.autotune"):
        call_add(k, 100)
    assert k.last.source == "default" and k.last.config["BLOCK"] == 32
    assert "all failed" in k.last.reason and "every one of 3 configs failed" in caplog.text


# -- listeners and log -------------------------------------------------------------------------


def test_listeners_and_log_line(db_path: Path, caplog) -> None:
    got: list[Selection] = []
    local: list[Selection] = []
    add_listener(got.append)
    try:
        k, _ = make_add(db_path, mode="on_miss", listener=local.append)
        with caplog.at_level(logging.INFO, "tunex.autotune"):
            call_add(k, 1000)
            call_add(k, 1000)  # hot path: no event
            call_add(k, 900)
    finally:
        remove_listener(got.append)
    assert [s.source for s in got] == ["tuned", "cache"] == [s.source for s in local]
    sel = got[0]
    assert sel.kernel == "add_kernel" and sel.trials == 3 and sel.key == {"n": 1000}
    assert sel.speedup == pytest.approx(3.0) and "3.00x over default" in sel.reason
    assert "from tuned (tuned 3 trials" in caplog.text and "BLOCK=64" in caplog.text


def test_a_failing_listener_does_not_break_the_launch(db_path: Path, caplog) -> None:
    def bad(sel: Selection) -> None:
        raise ValueError("listener bug")

    k, _ = make_add(db_path, listener=bad)
    call_add(k, 64)
    assert "listener" in caplog.text


# -- drop-in for triton.autotune ---------------------------------------------------------------


def test_reset_to_zero(db_path: Path) -> None:
    bench = FakeBench()
    k = tunex.autotune(CONFIGS, key=["n"], reset_to_zero=["out"], mode="on_miss",
                       db=str(db_path), bench=bench, remeasure=0)(jit(accumulate_kernel))
    x = torch.ones(256)
    out = torch.zeros(256)
    k[grid(256)](x, out, 256)
    assert len(bench.calls) == 3  # each benchmark run added x to out; reset before each
    torch.testing.assert_close(out, x)


def test_restore_value(db_path: Path) -> None:
    bench = FakeBench()
    k = tunex.autotune(CONFIGS, key=["n"], restore_value=["x"], mode="on_miss",
                       db=str(db_path), bench=bench)(jit(increment_kernel))
    x = torch.zeros(100)
    k[grid(100)](x, 100)
    torch.testing.assert_close(x, torch.ones(100))  # tuning runs were undone


def test_user_hooks_and_config_pre_hook(db_path: Path) -> None:
    events: list[str] = []
    configs = [triton.Config({"BLOCK": 32}, pre_hook=lambda a: events.append(f"cfg{a['BLOCK']}")),
               triton.Config({"BLOCK": 64})]
    k = tunex.autotune(
        configs, key=["n"], mode="on_miss", db=str(db_path), bench=FakeBench(), remeasure=0,
        pre_hook=lambda a, reset_only=False: events.append("pre" + ("-reset" if reset_only
                                                                    else "")),
        post_hook=lambda a, exception: events.append("post"))(jit(add_kernel))
    x, y, out = data(64)
    k[grid(64)](x, y, out, 64)
    # per config: a compile run and one timed run, each wrapped in pre/post; then the reset
    assert events == ["cfg32", "pre", "post", "cfg32", "pre", "post",
                      "pre", "post", "pre", "post", "pre-reset"]
    events.clear()
    k.clear_cache()
    calls: list[str] = []
    k2 = tunex.autotune(configs[:1], key=["n"], db=str(db_path))(jit(add_kernel))
    k2[grid(64)](x, y, out, 64)
    k2[grid(64)](x, y, out, 64)
    calls = [e for e in events if e == "cfg32"]
    assert len(calls) == 2  # a config's pre_hook runs on every launch, hot path included


def test_prune_configs_by(db_path: Path) -> None:
    bench = FakeBench()
    k = tunex.autotune(
        CONFIGS, key=["n"], mode="on_miss", db=str(db_path), bench=bench,
        prune_configs_by={"early_config_prune": lambda cs, nargs, **kw: cs[1:],
                          "perf_model": lambda **kw: kw["BLOCK"], "top_k": 1})(jit(add_kernel))
    call_add(k, 100)
    assert [c["BLOCK"] for c in bench.calls] == [64]


def test_triton_do_bench_argument(db_path: Path) -> None:
    seen: list[tuple[float, ...]] = []

    def do_bench(kernel_call: Callable[[], Any], quantiles: tuple[float, ...]) -> list[float]:
        kernel_call()
        seen.append(quantiles)
        return [1.0, 0.9, 1.1]

    k = tunex.autotune(CONFIGS, key=["n"], mode="on_miss", db=str(db_path),
                       do_bench=do_bench, remeasure=0)(jit(add_kernel))
    call_add(k, 100)
    assert seen == [(0.5, 0.2, 0.8)] * 3


# -- packs and model at runtime ----------------------------------------------------------------


def tune_and_export(db_path: Path, tmp_path: Path, n: int = 1000) -> Path:
    tuner, _ = make_add(db_path, mode="on_miss")
    call_add(tuner, n)
    with Database(db_path) as d:
        export_pack(d, tmp_path / "pack.json", name="mylib", version="1.2")
    return tmp_path / "pack.json"


def test_pack_loaded_by_api(db_path: Path, tmp_path: Path) -> None:
    pack = tune_and_export(db_path, tmp_path)
    k, bench = make_add(tmp_path / "fresh.db")
    load_packs(pack)
    call_add(k, 1000)
    assert k.last.source == "pack" and k.last.reason == "pack mylib-1.2 exact device"
    assert k.last.config["BLOCK"] == 64 and bench.calls == []
    call_add(k, 4000)  # nearest bucket: 4096 is 2 steps from 1024
    assert k.last.source == "pack" and "nearest bucket n=1024" in k.last.reason


def test_pack_from_env(db_path: Path, tmp_path: Path, monkeypatch, caplog) -> None:
    pack = tune_and_export(db_path, tmp_path)
    monkeypatch.setenv("TUNEX_PACKS", os.pathsep.join([str(pack)]))
    k, _ = make_add(tmp_path / "fresh.db")
    call_add(k, 1000)
    assert k.last.source == "pack"
    # a bad pack in the environment is skipped with a warning, like an unusable database;
    # the good ones beside it still resolve, and an explicit load_packs raises
    bad = tmp_path / "missing.json"
    monkeypatch.setenv("TUNEX_PACKS", os.pathsep.join([str(bad), str(pack)]))
    k2, _ = make_add(tmp_path / "fresh.db")
    with caplog.at_level("WARNING", logger="tunex.autotune"):
        call_add(k2, 1000)
    assert k2.last.source == "pack"
    assert any("TUNEX_PACKS: skipping" in r.message and "cannot read" in r.message
               for r in caplog.records)
    monkeypatch.setenv("TUNEX_PACKS", str(bad))
    k3, _ = make_add(tmp_path / "fresh.db")
    call_add(k3, 1000)
    assert k3.last.source != "pack"
    with pytest.raises(PackError, match="cannot read"):
        load_packs(bad)


def test_db_comes_before_packs(db_path: Path, tmp_path: Path) -> None:
    pack = tune_and_export(db_path, tmp_path)
    with Database(tmp_path / "mine.db") as d:
        k, _ = make_add(tmp_path / "mine.db")
        w = Measurement(Config(BLOCK=128, num_warps=4, num_stages=3), Status.OK, (0.5,))
        load_packs(pack)
        x, y, out = data(1000)
        named = k._bind((x, y, out, 1000), {})
        k._dtype_names = ["x", "y", "out"]
        d.record(k.workload(named)[0], w)
    call_add(k, 1000)
    assert k.last.source == "db" and k.last.config["BLOCK"] == 128


def test_bad_pack_is_refused_whole(db_path: Path, tmp_path: Path) -> None:
    good = tune_and_export(db_path, tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text(good.read_text().replace('"BLOCK": 64', '"BLOCK": 32'))
    with pytest.raises(PackError, match="checksum"):
        load_packs(good, bad)
    assert tunex.autotune.loaded_packs() == []  # type: ignore[attr-defined]


def test_on_miss_uses_exact_pack_and_tunes_otherwise(db_path: Path, tmp_path: Path) -> None:
    pack = tune_and_export(db_path, tmp_path)
    load_packs(pack)
    k, bench = make_add(tmp_path / "fresh.db", mode="on_miss")
    call_add(k, 1000)
    assert k.last.source == "pack" and bench.calls == []
    call_add(k, 4000)  # nearest-bucket pack config is a seed, measured right after the default
    assert k.last.source == "tuned"
    assert [c["BLOCK"] for c in bench.calls[:2]] == [32, 64]


def test_pack_of_another_kernel_version_is_not_used(db_path: Path, tmp_path: Path,
                                                    caplog) -> None:
    pack = tune_and_export(db_path, tmp_path)
    k, _ = make_add(tmp_path / "fresh.db")
    k.kernel_hash = "0" * 16  # the kernel's source changed since the pack was made
    load_packs(pack)
    with caplog.at_level(logging.WARNING, "tunex.autotune"):
        call_add(k, 1000)
    assert k.last.source == "default" and "another version of this kernel" in caplog.text


def test_cost_model_prediction(db_path: Path, tmp_path: Path) -> None:
    pytest.importorskip("lightgbm")
    space = Space([Pow2("BLOCK", 32, 1024)])

    def bench(call: Callable[[], Any], config: Config) -> list[float]:
        return [SPEED[config["BLOCK"]]]

    tuner = tunex.autotune(space=space, key=["n"], mode="on_miss", db=str(db_path),
                           bench=bench)(jit(add_kernel))
    for n in (100, 200, 300, 400):
        call_add(tuner, n)
    path = tuner.train_model()
    assert path == db_path.parent / "tunex-models" / "add_kernel.json" and path.exists()
    k = tunex.autotune(space=space, key=["n"], db=str(db_path))(jit(add_kernel))
    call_add(k, 500)  # the nearest tuned shape (n=400) comes before the model
    assert k.last.source == "db" and "nearest tuned workload" in k.last.reason
    elsewhere = tunex.autotune(space=space, key=["n"], db=str(tmp_path / "empty.db"),
                               model=path)(jit(add_kernel))
    call_add(elsewhere, 500)  # no tuned shape: the model, trained where shapes were tuned
    assert elsewhere.last.source == "model" and elsewhere.last.config["BLOCK"] == 64
    p = tunex.autotune(space=space, key=["n"], db=str(db_path), mode="pinned")(jit(add_kernel))
    call_add(p, 500)
    assert p.last.source == "default"  # pinned never predicts


def test_a_cost_model_trained_on_two_devices_predicts_for_a_new_shape(tmp_path: Path) -> None:
    """Trials of two devices train a model with a column per device name, which prediction
    must rebuild (it did not, and every such model was refused as "the space changed"); rows
    of 256 and 4096 elements, fastest with a block of the row, teach the block for 1024."""
    pytest.importorskip("lightgbm")
    from tunex.decorator._model import predict_best, train
    from tunex.trial import Workload

    space = Space([Pow2("BLOCK", 64, 8192), Pow2("warps", 1, 8)])

    def row(n: int, device: str) -> Workload:
        return Workload("norm", problem={"n": n}, target={"device": device})

    def trials(n: int) -> list[Measurement]:
        return [Measurement(c, Status.OK, (1 + abs(np.log2(c["BLOCK"] / n)) + 0.1 * c["warps"],))
                for c in space]

    class History:
        def history(self, kernel: str) -> list[tuple[Workload, list[Measurement]]]:
            return [(row(n, d), trials(n)) for n in (256, 4096) for d in ("gpu-a", "gpu-b")]

    path = train(History(), "norm", space, tmp_path / "norm.json")
    config, why = predict_best(path, space, row(1024, "gpu-b"))
    assert config == Config(BLOCK=1024, warps=1) and "trained on 4 workloads" in why


def test_a_cost_model_learns_from_trials_of_the_kernels_older_space(tmp_path: Path) -> None:
    """The kernel gained ``stages`` since its rows of 256 and 4096 elements were tuned: those
    trials (without it) still train the model, which picks the block of a 1024 row."""
    pytest.importorskip("lightgbm")
    from tunex.decorator._model import predict_best, train
    from tunex.trial import Workload

    old = Space([Pow2("BLOCK", 64, 8192), Pow2("warps", 1, 8)])
    space = Space([Pow2("BLOCK", 64, 8192), Pow2("warps", 1, 8), Int("stages", 1, 3)])

    def row(n: int) -> Workload:
        return Workload("norm", problem={"n": n})

    class History:
        def history(self, kernel: str) -> list[tuple[Workload, list[Measurement]]]:
            return [(row(n), [Measurement(c, Status.OK, (
                1 + abs(np.log2(c["BLOCK"] / n)) + 0.1 * c["warps"],)) for c in old])
                for n in (256, 4096)]

    path = train(History(), "norm", space, tmp_path / "norm.json")
    config, why = predict_best(path, space, row(1024))
    assert config["BLOCK"] == 1024 and config["warps"] == 1 and "trained on 2 workloads" in why


def test_a_cost_model_with_pair_columns_is_rebuilt_for_prediction(tmp_path: Path) -> None:
    """Trained with the relative sizes' pair columns (two sizes that differ: 2 parameter
    pairs x 2 orders), the saved model's description makes prediction build the same columns
    (otherwise it is refused as "the space changed"), and the pick follows the grid: the
    fastest configs have 64 blocks on each sibling."""
    pytest.importorskip("lightgbm")
    from tunex.decorator._model import predict_best, train
    from tunex.trial import Workload

    space = Space([Pow2("BM", 16, 512), Pow2("BN", 16, 512)])

    def mm(m: int, n: int) -> Workload:
        return Workload("mm", problem={"M": m, "N": n})

    def trials(m: int, n: int) -> list[Measurement]:
        blocks = [max(1, m // c["BM"]) * max(1, n // c["BN"]) for c in space]
        return [Measurement(c, Status.OK, (1 + abs(np.log2(b / 64)) + 0.01 * c["BM"] / c["BN"],))
                for c, b in zip(space, blocks)]

    class History:
        def history(self, kernel: str) -> list[tuple[Workload, list[Measurement]]]:
            return [(mm(m, n), trials(m, n)) for m, n in ((1024, 1024), (256, 4096))]

    path = train(History(), "mm", space, tmp_path / "mm.json", relative_pairs=True)
    meta = json.loads(path.with_name("mm.json.meta.json").read_text())
    assert meta["relative_pairs"] is True and meta["relative"] == ["M", "N"]
    config, _why = predict_best(path, space, mm(2048, 512))
    assert (2048 // config["BM"]) * (512 // config["BN"]) == 64


# -- GPU ---------------------------------------------------------------------------------------


@gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA GPU")
def test_gpu_tune_on_miss_with_do_bench(db_path: Path) -> None:
    configs = [*CONFIGS, triton.Config({"BLOCK": 8192})]  # fails its static_assert
    k = tunex.autotune(configs, key={"n": "pow2"}, mode="on_miss",
                       db=str(db_path))(jit(add_kernel, interpret=False))
    n = 1 << 20
    x, y, out = (torch.randn(n, device="cuda") for _ in range(3))
    k[grid(n)](x, y, out, n)
    torch.testing.assert_close(out, x + y)
    assert k.last.source == "tuned" and k.last.workload.target["arch"].startswith("sm_")
    with Database(db_path) as d:
        ms = d.measurements(d.workloads()[0])
    assert len({m.config for m in ms if m.ok}) == 3  # and the leaders re-measured
    assert any(m.status is Status.COMPILE_ERROR for m in ms)
    assert max(len(m.times_ms) for m in ms) > 5  # do_bench's repeats, all kept


@gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA GPU")
def test_gpu_hot_path_is_cheaper_than_triton_autotune(db_path: Path) -> None:
    base = jit(add_kernel, interpret=False)
    ours = tunex.autotune(CONFIGS, key=["n"], db=str(db_path))(jit(add_kernel, interpret=False))
    theirs = triton.autotune(CONFIGS, key=["n"])(jit(add_kernel, interpret=False))
    n = 4096
    x, y, out = (torch.randn(n, device="cuda") for _ in range(3))
    g = (n // 32,)

    def per_call(fn: Callable[[], Any], reps: int = 2000) -> float:
        fn()
        torch.cuda.synchronize()
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            torch.cuda.synchronize()
            best = min(best, (time.perf_counter() - t0) / reps)
        return best

    bare = per_call(lambda: base[g](x, y, out, n, BLOCK=32, num_warps=1))
    t_ours = per_call(lambda: ours[g](x, y, out, n))
    t_theirs = per_call(lambda: theirs[g](x, y, out, n))
    assert t_ours - bare < t_theirs - bare + 0.5e-6
    assert t_ours - bare < 3e-6


def test_db_rows_outside_the_space_are_ignored(db_path: Path) -> None:
    old, _ = make_add(db_path, mode="on_miss")
    call_add(old, 1000)  # rows for configs with num_stages, from the triton.Config list
    space = Space([Pow2("BLOCK", 32, 128)])
    bench = FakeBench()
    k = tunex.autotune(space=space, key={"n": "pow2"}, mode="on_miss", db=str(db_path),
                       bench=bench)(jit(add_kernel))
    call_add(k, 1000)  # same workload, other space: tuned, not taken from the foreign rows
    assert k.last.source == "tuned" and len(set(bench.calls)) == 3
    assert all(c in space for c in bench.calls)  # nor re-measured among the leaders
    assert k.last.config == Config(BLOCK=64)


def test_default_launch_options_are_not_passed(db_path: Path) -> None:
    k, _ = make_add(db_path)
    kw, hook = k._entry(Config(BLOCK=32, num_warps=4, num_stages=3))
    assert kw == {"BLOCK": 32, "warmup": False} and hook is None
    kw, _ = k._entry(Config(BLOCK=32, num_warps=8, num_stages=4))
    assert kw == {"BLOCK": 32, "num_warps": 8, "num_stages": 4, "warmup": False}


def test_close_leaders_are_remeasured(db_path: Path) -> None:
    times = {32: [1.0, 1.5], 64: [1.01, 1.0], 128: [3.0, 3.0]}  # 32 got lucky the first time
    seen: list[int] = []

    def bench(call: Callable[[], Any], config: Config) -> list[float]:
        b = config["BLOCK"]
        seen.append(b)
        return [times[b][sum(1 for s in seen if s == b) - 1]]

    k, _ = make_add(db_path, mode="on_miss", bench=bench, remeasure=2)
    call_add(k, 100)
    assert sorted(seen) == [32, 32, 64, 64, 128] and k.last.config["BLOCK"] == 64
    with Database(db_path) as d:
        assert [t.strategy for t in d.trials(d.workloads()[0])][-2:] == ["remeasure"] * 2


def test_warmup_compiles_every_config(db_path: Path, monkeypatch) -> None:
    k, _ = make_add(db_path)
    seen: list[dict[str, Any]] = []
    monkeypatch.setattr(k.fn, "warmup", lambda *a, grid, **kw: seen.append(kw))
    x, y, out = data(64)
    assert len(k.warmup(x, y, out, 64, grid=(1,))) == 3
    assert [kw["BLOCK"] for kw in seen] == [32, 64, 128]
    assert k.last is None  # nothing was resolved or launched


# -- one loop (issue 9) ------------------------------------------------------------------------


def test_a_time_only_budget_runs_the_default_strategy(db_path: Path) -> None:
    space = Space([Pow2("BLOCK", 32, 1024), Choice("num_warps", [1, 2, 4])])
    k = tunex.autotune(space=space, key={"n": "pow2"}, mode="on_miss", budget="2s",
                       db=str(db_path), bench=FakeBench(), remeasure=0)(jit(add_kernel))
    call_add(k, 3000)
    with Database(db_path) as d:
        trials = d.trials(d.workloads()[0])
    # searched by "model", not enumerated from the smallest BLOCK
    assert {t.strategy for t in trials} == {"autotune:model"} and len(trials) >= 2
    assert "(model" in k.last.reason
    assert k.last.transfer == 0 and "warm start" not in k.last.reason  # nothing to start from
    call_add(k, 40000)  # another shape: its search starts from the first one's trials
    assert k.last.source == "tuned" and k.last.transfer == 1
    assert "warm start from 1 other workload" in k.last.reason


def test_a_new_shape_measures_the_best_configs_of_known_shapes_first(db_path: Path) -> None:
    space = Space([Pow2("BLOCK", 32, 1024), Choice("num_warps", [1, 2, 4])])

    def bench(call: Callable[[], Any], config: Config) -> list[float]:
        call()
        return [0.5 if (config["BLOCK"], config["num_warps"]) == (512, 2) else 3.0]

    def make(budget: str) -> Any:
        return tunex.autotune(space=space, key={"n": "pow2"}, mode="on_miss", budget=budget,
                              db=str(db_path), bench=bench, remeasure=0)(jit(add_kernel))

    first = make("18trials")
    call_add(first, 1000)  # the whole space: BLOCK=512, num_warps=2 wins
    assert first.last.config == Config(BLOCK=512, num_warps=2)
    second = make("2trials")
    call_add(second, 3000)  # a new bucket: the default, then the known shape's best
    assert second.last.config == Config(BLOCK=512, num_warps=2)
    with Database(db_path) as d:
        w = next(w for w in d.workloads() if w.problem["n"] == 4096)
        assert [m.config for m in d.measurements(w)] == [space.default(),
                                                         Config(BLOCK=512, num_warps=2)]


def test_options_are_one_frozen_value_and_unknown_ones_are_a_clear_error() -> None:
    from tunex.decorator import AutotuneOptions

    with pytest.raises(ConfigError, match="no option budgett"):
        tunex.autotune(CONFIGS, key=["n"], budgett="5trials")
    with pytest.raises(ConfigError, match="warmup=0"):
        tunex.autotune(CONFIGS, key=["n"], warmup=0)
    k = tunex.autotune(CONFIGS, key=["n"], warmup=5, rep=50)(jit(add_kernel))
    assert isinstance(k.options, AutotuneOptions)
    assert (k.options.measure.warmup_ms, k.options.measure.max_time_ms) == (5.0, 50.0)
    with pytest.raises(AttributeError):
        k.options.mode = "on_miss"  # type: ignore[misc]


def test_triton_autotune_cuda_graph_and_cache_results_are_accepted(db_path: Path,
                                                                    caplog) -> None:
    with caplog.at_level(logging.INFO, "tunex.autotune"):
        k, _ = make_add(db_path, mode="on_miss", use_cuda_graph=True, cache_results=True)
    assert k.options.measure.graphs and "tuning database" in caplog.text
    call_add(k, 100)
    assert k.last.source == "tuned"


def test_failure_status_is_decided_by_exception_class() -> None:
    from triton.compiler.errors import CompilationError
    from triton.runtime.errors import OutOfResources

    from tunex.targets.gpu import failure_status

    class MyCompilationError(CompilationError):
        def __init__(self) -> None:
            Exception.__init__(self, "bad")

    class OutOfResourcesLookalike(Exception):  # a name is not a class
        pass

    assert failure_status(OutOfResources(1, 2, "shared memory")) is Status.PRUNED
    assert failure_status(MyCompilationError()) is Status.COMPILE_ERROR
    assert failure_status(OutOfResourcesLookalike()) is Status.RUNTIME_ERROR


def test_a_users_kernel_compiles_ahead_of_time_in_a_build_process() -> None:
    # what the decorator's tuning on a miss does on a GPU, minus the GPU: a kernel defined
    # here (not importable by a worker) travels by source and compiles for sm_90 there
    from tunex.cluster import BuildPool
    from tunex.decorator._target import CallBuilder
    from tunex.targets.gpu import KernelSource, specialize

    SCALE = tl.constexpr(3)  # a closure value the kernel reads

    def scaled(x, out, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out + offs, tl.load(x + offs, mask=m) * SCALE, mask=m)

    fn = jit(scaled, interpret=False)
    source = KernelSource.of(fn)
    assert source is not None and source.module is None
    assert source.free == (("SCALE", "value", SCALE),)
    x = torch.empty(4096, device="meta")
    sig, consts, attrs = specialize(fn, [x, x, 4096, 0])
    consts.pop((3,))
    builder = CallBuilder(source, sig, consts, attrs, (("BLOCK", 3),), 90,
                          {"smem": 232448.0, "regs_per_sm": 65536.0})
    pool = BuildPool(1, timeout=120)
    try:
        w = tunex.Workload("scaled")
        arts = [pool.submit("k", builder, w, Config(BLOCK=b, num_warps=4)).result(120)
                for b in (128, 96)]  # 96: tl.arange needs a power of 2
    finally:
        pool.close()
    assert arts[0].ok and arts[0].payload.arch == 90 and arts[0].facts["shared_bytes"] >= 0
    assert arts[1].status is Status.COMPILE_ERROR and "power of 2" in (arts[1].error or "")


@gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA GPU")
def test_gpu_on_miss_builds_in_the_pool_and_keeps_reset_to_zero(db_path: Path) -> None:
    space = Space([Pow2("BLOCK", 32, 1024), Choice("num_warps", [1, 2, 4, 8])])
    k = tunex.autotune(space=space, key={"n": "pow2"}, mode="on_miss", budget="12trials",
                       reset_to_zero=["out"], db=str(db_path))(
        jit(accumulate_kernel, interpret=False))
    n = 1 << 20
    x = torch.randn(n, device="cuda")
    out = torch.zeros(n, device="cuda")
    k[grid(n)](x, out, n)
    torch.testing.assert_close(out, x)  # every benchmark run was reset away
    assert k.last.source == "tuned" and "built in parallel" in k.last.reason, k.last.reason
    with Database(db_path) as d:
        ms = d.measurements(d.workloads()[0])
    assert len(ms) == 12 and all(m.ok for m in ms)
    assert all(m.compile_ms is not None and len(m.times_ms) >= 5 for m in ms)


def test_a_kernel_like_another_starts_its_tuning_from_the_others_trials(db_path: Path) -> None:
    """``like=["add_a"]``: the second kernel's tuning warm-starts from the first's trials (the
    selection counts the workload it learned from); so it does unnamed, as a related kernel
    measured on the same device (their spaces are the same); ``related=False`` without
    ``like``: it starts cold."""
    space = Space([Pow2("BLOCK", 32, 1024), Choice("num_warps", [1, 2, 4])])
    bench = lambda call, config: [1.0 + abs(np.log2(config["BLOCK"] / 256))]  # noqa: E731
    opts = dict(space=space, key={"n": "pow2"}, mode="on_miss", db=str(db_path), bench=bench,
                remeasure=0)
    call_add(tunex.autotune(name="add_a", budget="12trials", **opts)(jit(add_kernel)), 100)
    # unnamed: add_a and the add_b00 tuned just before, both of the same space and device
    for like, related, used in (([], False, 0), ([], True, 2), (["add_a"], False, 1)):
        k = tunex.autotune(name=f"add_b{len(like)}{int(related)}", budget="3trials", like=like,
                           related=related, **opts)(jit(add_kernel))
        call_add(k, 100)
        assert k.last.source == "tuned" and k.last.transfer == used
    with pytest.raises(ConfigError, match="like='add_a'"):
        tunex.autotune(space=space, key=["n"], like="add_a")


def test_a_kernels_second_shape_learns_from_related_kernels_too(db_path: Path) -> None:
    """A kernel's second shape warm-starts from its first and, beside it, from the kernels
    whose spaces name most of its parameters (here another kernel of the same space);
    ``related=False`` leaves them out."""
    space = Space([Pow2("BLOCK", 32, 1024), Choice("num_warps", [1, 2, 4])])
    bench = lambda call, config: [1.0 + abs(np.log2(config["BLOCK"] / 256))]  # noqa: E731
    opts = dict(space=space, key={"n": "pow2"}, mode="on_miss", db=str(db_path), bench=bench,
                remeasure=0, budget="12trials")
    call_add(tunex.autotune(name="add_a", **opts)(jit(add_kernel)), 100)
    for related, used in ((True, 2), (False, 1)):
        k = tunex.autotune(name=f"add_r{int(related)}", related=related,
                           **opts)(jit(add_kernel))
        call_add(k, 100)  # its first shape: the other kernel, measured on the same device
        assert k.last.source == "tuned" and k.last.transfer == int(related)
        call_add(k, 4000)
        assert k.last.source == "tuned" and k.last.transfer == used
    with pytest.raises(ConfigError, match="related=1"):
        tunex.autotune(space=space, key=["n"], related=1)
    with pytest.raises(ConfigError, match="prior='yes': give True or False"):
        tunex.autotune(space=space, key=["n"], prior="yes")


def test_the_decorators_tuning_takes_the_prior_unless_told_not_to(db_path: Path,
                                                                   monkeypatch) -> None:
    """On by default since it was measured on the GPU (RESULTS, "the prior in the
    decorator"); on a device the prior has no trials of, it reads nothing (tests/db)."""
    import tunex.tuner

    seen = []
    real = tunex.tuner.Tuner.__init__

    def spy(self, *args, **kwargs):
        seen.append(kwargs.get("prior"))
        real(self, *args, **kwargs)

    monkeypatch.setattr(tunex.tuner.Tuner, "__init__", spy)
    for name, extra in (("add_p1", {}), ("add_p0", {"prior": False})):
        k, _ = make_add(db_path, mode="on_miss", name=name, **extra)
        call_add(k, 100)
        assert k.last.source == "tuned"
    assert seen == [True, False]


def test_patience_stops_a_search_that_no_longer_gains(db_path: Path) -> None:
    space = Space([Pow2("BLOCK", 32, 1024), Choice("num_warps", [1, 2, 4])])
    flat = lambda call, config: [1.0]  # noqa: E731 - every config alike
    k = tunex.autotune(space=space, key={"n": "pow2"}, mode="on_miss", budget="18trials",
                       patience=5, db=str(db_path), bench=flat, remeasure=0)(jit(add_kernel))
    call_add(k, 100)
    # five trials proposed after the first (the only gain), plus those in flight with it
    assert 6 <= k.last.trials < 18 and "no improvement in 5 trials" in k.last.reason
    with pytest.raises(ConfigError, match="patience=0"):
        tunex.autotune(space=space, key=["n"], patience=0)
