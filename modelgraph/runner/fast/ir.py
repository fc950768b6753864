"""Loops written as LLVM IR with explicit vectors and compiled with llvmlite (installed with Numba by
the ``jit`` extra): the machine they are compiled for (:class:`Target`), a small writer for IR
functions with structured loops (:class:`Function`), and compilation with a disk cache of the machine
code (:func:`compiled`). The loops themselves are :mod:`modelgraph.runner.fast.depthwise_ir` and
:mod:`modelgraph.runner.fast.gemm_ir`; :mod:`modelgraph.runner.fast.ir_call` calls them from Numba.

Loops written for Numba leave vectors to LLVM's loop vectorizer, which only vectorizes an innermost
loop and keeps nothing in registers across an outer one. Here a tile of results is a set of vector
values carried through the loop over the sums (phi nodes), which LLVM keeps in registers, and every
load is written once where it can serve several multiply-adds.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any


@dataclass(frozen=True)
class Target:
    """The machine the code is compiled for: its CPU name and features, and the vector shape."""

    cpu: str
    features: str
    lanes: int  # floats per vector
    pixels: int  # output pixels per tile

    @property
    def vector(self) -> str:
        return f"<{self.lanes} x float>"


@cache
def host_target() -> Target:
    """This machine's :class:`Target` (llvmlite's view of the host CPU)."""
    from llvmlite import binding as ll

    initialize()
    features = ll.get_host_cpu_features()
    if features.get("avx512f"):
        lanes, pixels = 16, 8
    elif features.get("avx"):
        lanes, pixels = 8, 4
    else:
        lanes, pixels = 4, 4
    return Target(ll.get_host_cpu_name(), features.flatten(), lanes, pixels)


@cache
def initialize() -> None:
    from llvmlite import binding as ll

    ll.initialize_native_target()
    ll.initialize_native_asmprinter()


def declarations(target: Target) -> list[str]:
    """The intrinsics every module's loops call: fused multiply-add, masked vector load and store."""
    vec, lanes = target.vector, target.lanes
    return [
        f"declare {vec} @llvm.fma.v{lanes}f32({vec}, {vec}, {vec})",
        f"declare {vec} @llvm.masked.load.v{lanes}f32.p0(ptr, i32, <{lanes} x i1>, {vec})",
        f"declare void @llvm.masked.store.v{lanes}f32.p0({vec}, ptr, i32, <{lanes} x i1>)",
    ]


def lane_mask(lanes: int, used: int) -> str | None:
    """A constant mask of the first ``used`` of ``lanes`` lanes (None: all of them)."""
    if used == lanes:
        return None
    return "<" + ", ".join(f"i1 {str(i < used).lower()}" for i in range(lanes)) + ">"


@cache
def callers() -> Any:
    """:mod:`modelgraph.runner.fast.ir_call`, the Numba functions that check a call's arrays and run
    the loops (imported on first use: it imports Numba)."""
    from modelgraph.runner.fast import ir_call

    return ir_call


@dataclass
class Function:
    """IR text of one function for ``target``, written top to bottom, with structured loops."""

    target: Target
    lines: list[str] = field(default_factory=list)
    count: int = 0
    block: str = "entry"

    def pointer(self, base: str, offset: str | int) -> str:
        """The pointer ``offset`` floats from pointer ``base``."""
        return self.let(f"getelementptr inbounds float, ptr {base}, i64 {offset}")

    def load_vector(self, base: str, offset: str | int, mask: str | None = None) -> str:
        """The vector at float ``offset`` from pointer ``base`` (only the lanes of ``mask``, an
        ``<lanes x i1>`` operand, when given; the others zero)."""
        vec, lanes = self.target.vector, self.target.lanes
        at = self.pointer(base, offset)
        if mask is None:
            return self.let(f"load {vec}, ptr {at}, align 4")
        return self.let(
            f"call {vec} @llvm.masked.load.v{lanes}f32.p0(ptr {at}, i32 4, <{lanes} x i1> {mask}, {vec} zeroinitializer)"
        )

    def store_vector(self, value: str, base: str, offset: str | int, mask: str | None = None) -> None:
        """Store vector ``value`` at float ``offset`` from pointer ``base`` (the lanes of ``mask``)."""
        vec, lanes = self.target.vector, self.target.lanes
        at = self.pointer(base, offset)
        if mask is None:
            self.emit(f"store {vec} {value}, ptr {at}, align 4")
        else:
            self.emit(
                f"call void @llvm.masked.store.v{lanes}f32.p0({vec} {value}, ptr {at}, i32 4, <{lanes} x i1> {mask})"
            )

    def fma(self, a: str, b: str, c: str) -> str:
        """``a * b + c`` on vectors, rounded once."""
        vec = self.target.vector
        return self.let(f"call {vec} @llvm.fma.v{self.target.lanes}f32({vec} {a}, {vec} {b}, {vec} {c})")

    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"%{stem}{self.count}"

    def let(self, text: str) -> str:
        name = self.fresh("v")
        self.lines.append(f"  {name} = {text}")
        return name

    def emit(self, text: str) -> None:
        self.lines.append(f"  {text}")

    def label(self, name: str) -> None:
        self.lines.append(f"{name}:")
        self.block = name

    def loop(
        self,
        start: str | int,
        stop: str,
        step: int,
        body: Callable[[str, list[str]], list[str] | None],
        carried: list[tuple[str, str]] = (),  # type: ignore[assignment]
    ) -> tuple[str, list[str]]:
        """``for i in range(start, stop - step + 1, step)``: ``body(i, values)`` writes one pass and
        returns the new ``carried`` values. Returns the index at the exit (the first block not run)
        and the carried values there."""
        n = self.fresh("L")[1:]
        head, body_label, done = f"{n}.head", f"{n}.body", f"{n}.done"
        entry = self.block
        self.emit(f"br label %{head}")
        self.label(head)
        index, following = f"%{n}.i", f"%{n}.next"
        values = [f"%{n}.c{j}" for j in range(len(carried))]
        phis_at = len(self.lines)
        self.lines.append("")  # the phis, written once the back edge is known
        end = self.let(f"add i64 {index}, {step}")
        more = self.let(f"icmp sle i64 {end}, {stop}")
        self.emit(f"br i1 {more}, label %{body_label}, label %{done}")
        self.label(body_label)
        new = body(index, values) or []
        latch = self.block
        self.emit(f"{following} = add i64 {index}, {step}")
        self.emit(f"br label %{head}")
        phis = [f"  {index} = phi i64 [{start}, %{entry}], [{following}, %{latch}]"]
        phis += [
            f"  {value} = phi {ty} [{init}, %{entry}], [{new[j]}, %{latch}]"
            for j, (value, (ty, init)) in enumerate(zip(values, carried, strict=True))
        ]
        self.lines[phis_at] = "\n".join(phis)
        self.label(done)
        return index, values

    def tiles(self, count: str, sizes: tuple[int, ...], at: Callable[[int, str], None]) -> None:
        """Cover ``0 .. count - 1`` with tiles: ``at(size, start)`` writes a tile of ``size`` from
        ``start``. The largest size no larger than ``count`` is used, the last tile overlapping the
        one before it (it rewrites a few results with the same values) instead of a tail loop;
        ``sizes`` run from the largest down to 1."""
        size = sizes[0]
        if size == 1:
            self.loop(0, count, 1, lambda i, _: at(1, i))
            return

        def tiled() -> None:
            end, _ = self.loop(0, count, size, lambda i, _: at(size, i))
            last = self.let(f"sub i64 {count}, {size}")
            self.branch(self.let(f"icmp slt i64 {end}, {count}"), lambda: at(size, last), lambda: None)

        self.branch(
            self.let(f"icmp sge i64 {count}, {size}"), tiled, lambda: self.tiles(count, sizes[1:], at)
        )

    def exact_tiles(self, count: str, size: int, at: Callable[[int, str], None]) -> None:
        """Cover ``0 .. count - 1`` with tiles of ``size`` and one smaller tile for the rest, none
        overlapping (for tiles that add to what is there): ``at(size, start)`` writes a tile."""
        end, _ = self.loop(0, count, size, lambda i, _: at(size, i))
        rest = self.let(f"sub i64 {count}, {end}")

        def smaller(s: int) -> None:
            if s == 0:
                return
            self.branch(self.let(f"icmp eq i64 {rest}, {s}"), lambda: at(s, end), lambda: smaller(s - 1))

        smaller(size - 1)

    def branch(self, condition: str, then: Callable[[], None], otherwise: Callable[[], None]) -> None:
        """``if condition: then() else: otherwise()``."""
        n = self.fresh("B")[1:]
        self.emit(f"br i1 {condition}, label %{n}.then, label %{n}.else")
        self.label(f"{n}.then")
        then()
        self.emit(f"br label %{n}.end")
        self.label(f"{n}.else")
        otherwise()
        self.emit(f"br label %{n}.end")
        self.label(f"{n}.end")


@dataclass
class Compiled:
    """A compiled module: its engine (kept alive: it owns the machine code) and its functions'
    addresses, looked up once each."""

    engine: Any
    addresses: dict[str, int] = field(default_factory=dict)

    def address(self, entry: str) -> int:
        """The address of function ``entry``."""
        found = self.addresses.get(entry)
        if found is None:
            found = self.addresses[entry] = self.engine.get_function_address(entry)
            if not found:
                raise LookupError(f"the compiled module has no function {entry!r}")
        return found


_lock = threading.Lock()
_compiled: dict[tuple[Any, ...], Compiled] = {}


def compiled(key: tuple[Any, ...], target: Target, source: Callable[[], str], entry: str) -> int:
    """The address of function ``entry`` of the module ``source()`` writes, compiled for ``target``
    on first use of ``key`` (whatever entry asked first; or read from the object cache) and kept for
    the process."""
    done = _compiled.get(key)
    if done is None:
        with _lock:
            done = _compiled.get(key)
            if done is None:
                done = _compiled[key] = compile_source(target, source())
    return done.address(entry)


def compile_source(target: Target, source: str) -> Compiled:
    """Compile the IR module ``source`` for ``target`` (optimised as clang's -O3 would, unless its
    code is in the object cache)."""
    from llvmlite import binding as ll

    from modelgraph.runner.fast import object_cache

    initialize()
    module = ll.parse_assembly(source)
    module.verify()
    machine = ll.Target.from_default_triple().create_target_machine(
        cpu=target.cpu, features=target.features, opt=3, jit=True
    )
    engine = ll.create_mcjit_compiler(module, machine)
    cached = object_cache.ObjectCache(source, target.cpu, target.features)
    engine.set_object_cache(cached.store, cached.load)
    if not cached.hit():
        builder = ll.create_pass_builder(machine, ll.create_pipeline_tuning_options(speed_level=3))
        builder.getModulePassManager().run(module, builder)
    engine.finalize_object()
    return Compiled(engine)
