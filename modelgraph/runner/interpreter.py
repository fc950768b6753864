"""The plan and the interpreter: compile a ModelGraph once, run it many times.

Like torch.fx's ``Interpreter`` and onnx's ``ReferenceEvaluator``: :class:`Runner` walks the graph
once, at construction (:mod:`modelgraph.graph_walk`, the walk the ONNX exporter shares), and turns every node into a :class:`Step` — its kernel (one instance per layer, shared by
every call of that layer), the slots it reads and writes, the slots whose last use it is. Nested
models are inlined by the walk: their nodes become steps of the same plan, with their inputs bound to
the caller's slots and their outputs aliased to the outer node's outputs, so weights are bound once
and a nested model called twice runs the same kernels twice. ``run()`` walks the steps and frees each
value right after its last use, unless asked to keep intermediates (taps).

Masks: a ``mask=`` tensor a Keras 3 node records is passed like any other argument; the masks
Keras attaches to tensors at run time (every version) are propagated as
:mod:`modelgraph.runner.masks` states. Dtype policies are applied around the kernel
(:mod:`modelgraph.runner.dtypes`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from modelgraph.errors import (
    ConfigError,
    KernelError,
    ModelGraphError,
    RunError,
    UnsupportedConfigError,
    UnsupportedError,
    UnsupportedLayerError,
    UsageError,
    WeightsError,
    config_only_model,
)
from modelgraph.graph import (
    Layer,
    ModelGraph,
    Node,
    TensorRef,
    keras_version_tuple,
    map_refs,
    map_structure,
)
from modelgraph.graph_walk import (
    GraphWalker,
    Visit,
    call_kwargs,
    float32_variables,
    has_dtype_policy,
    output_keys,
)
from modelgraph.runner import dtypes as dt
from modelgraph.runner import fast
from modelgraph.runner import masks as mk
from modelgraph.runner.fast import jit
from modelgraph.runner.fast.fused import FUSED_PREFIX
from modelgraph.runner.fusion import fuse as fuse_graph
from modelgraph.runner.heap import keep_freed_memory
from modelgraph.runner.quantized import quantized_kernel
from modelgraph.runner.registry import KernelSpec, get_entry
from modelgraph.runner.schedule import ShapeSchedule, SideBySide, StepGraph, run_side_by_side
from modelgraph.runner.threads import blas_threads_now, run_threads, thread_count
from modelgraph.runner.threads import positive_threads as _positive_threads
from modelgraph.runner.weights import LazyWeights
from modelgraph.shape_rules import is_size_list

# Serial runs of an input shape timed (after one warm-up run) before the plan decides whether to run
# its independent steps side by side.
TIMED_RUNS = 2

# --- the plan ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _In:
    """A tensor position inside a call template: read slot ``slot``."""

    slot: int


@dataclass(frozen=True)
class InputSpec:
    """One model input: the InputLayer's name, batch shape (None for unknown) and dtype."""

    name: str
    shape: tuple[int | None, ...] | None
    dtype: str


@dataclass
class Step:
    """One node of the plan.

    ``kind`` is "kernel" for a computing node or "model" for the (free) node of a nested model, which
    only exists so its outputs can be tapped by the model's name.
    """

    index: int
    kind: str
    label: str
    path: str
    plain_path: str
    class_name: str
    node_index: int
    shared: bool
    fn: Callable[..., Any] | None = None
    args: Any = ()
    kwargs: Any = field(default_factory=dict)
    simple: tuple[int, ...] | None = None
    in_slots: tuple[int, ...] = ()
    out_slots: tuple[tuple[int, int], ...] = ()
    free: tuple[int, ...] = ()
    compute_dtype: str | None = None
    round_outputs: str | None = None
    mask_consume: Callable[[list[Any]], dict[str, Any]] | None = None
    mask_produce: Callable[..., list[Any]] | None = None
    mask_inputs: tuple[int, ...] = ()
    mask_hidden: frozenset[int] = frozenset()
    """Positions in ``mask_inputs`` whose mask a Keras 3 MultiHeadAttention cleared earlier."""
    depth: int = 0


@dataclass
class Problem:
    """Something the plan cannot run: which layer (path), which node, and the error."""

    path: str
    class_name: str
    error: BaseException

    @property
    def unsupported(self) -> bool:
        return isinstance(self.error, UnsupportedError)

    def __str__(self) -> str:
        return f"{self.path} ({self.class_name}): {self.error}"


@dataclass
class StepProfile:
    """Time and memory of one executed step (summed over batches)."""

    label: str
    path: str
    class_name: str
    seconds: float = 0.0
    output_bytes: int = 0
    live_bytes: int = 0
    calls: int = 0


@dataclass
class Profile:
    """What ``run(profile=True)`` measured."""

    steps: list[StepProfile]
    peak_live_bytes: int = 0
    total_seconds: float = 0.0
    weight_bytes: int = 0
    threads: int = 0  # threads of the profiled run (runner and BLAS); 0: not recorded


def median_profile(profiles: Sequence[Profile]) -> Profile:
    """One profile from several runs of the same plan: per step and in total the median time, the
    largest peak memory (``run --profile --repeat N``)."""
    import statistics

    first = profiles[0]
    steps = [
        replace(step, seconds=statistics.median(p.steps[i].seconds for p in profiles))
        for i, step in enumerate(first.steps)
    ]
    return Profile(
        steps=steps,
        peak_live_bytes=max(p.peak_live_bytes for p in profiles),
        total_seconds=statistics.median(p.total_seconds for p in profiles),
        weight_bytes=first.weight_bytes,
        threads=first.threads,
    )


def _tap_key(path: str, node: int, tensor: int, shared: bool, n_outputs: int) -> str:
    if n_outputs > 1:
        return f"tap/{path}:{node}:{tensor}"
    if shared:
        return f"tap/{path}:{node}"
    return f"tap/{path}"


def parse_tap_key(key: str) -> tuple[str, int | None, int]:
    """``tap/<path>[:<node>[:<tensor>]]`` -> (path, node or None, tensor)."""
    body = key[len("tap/") :] if key.startswith("tap/") else key
    head, _, last = body.rpartition("/")
    parts = last.split(":")
    name = parts[0]
    node: int | None = None
    tensor = 0
    if len(parts) >= 2 and parts[1].isdigit():
        node = int(parts[1])
    if len(parts) >= 3 and parts[2].isdigit():
        tensor = int(parts[2])
    path = f"{head}/{name}" if head else name
    return path, node, tensor


def _plain(path: str) -> str:
    """A path without the ``:<node>`` of shared nested models: ``inner:1/dense`` -> ``inner/dense``."""
    return "/".join(seg.split(":", 1)[0] for seg in path.split("/"))


def _fill(template: Any, values: list[Any]) -> Any:
    """A call template with each slot replaced by its value."""
    return map_structure(template, lambda leaf: values[leaf.slot], lambda v: isinstance(v, _In))


def _cast_tree(value: Any, dtype: str) -> Any:
    """Every array of a call structure cast to the compute dtype."""
    return map_structure(value, lambda a: dt.to_compute(a, dtype), lambda v: isinstance(v, np.ndarray))


def _shapes(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return tuple(value.shape)
    if isinstance(value, (list, tuple)):
        return [_shapes(v) for v in value]
    if isinstance(value, dict):
        return {k: _shapes(v) for k, v in value.items()}
    return value


def _nbytes(value: Any) -> int:
    return int(value.nbytes) if isinstance(value, np.ndarray) else 0


def _stateful(config: Mapping[str, Any]) -> bool:
    """Whether a layer config (or the RNN a Bidirectional / TimeDistributed wraps) is stateful."""
    if config.get("stateful") is True:
        return True
    for key in ("layer", "forward_layer", "backward_layer"):
        inner = config.get(key)
        if (
            isinstance(inner, Mapping)
            and isinstance(inner.get("config"), Mapping)
            and _stateful(inner["config"])
        ):
            return True
    return False


def _refuse_complex_weights(model: ModelGraph) -> None:
    """WeightsError for a weight stored as complex numbers: Keras variables are real, and casting one
    to float would silently drop the imaginary part (NumPy's ComplexWarning)."""
    for path, layer in model.walk():
        for w in layer.weights:
            if str(w.dtype).startswith("complex"):
                raise WeightsError(
                    f"weight '{w.name}' of layer '{'/'.join(path)}' ({w.location}) is stored as {w.dtype}: "
                    "Keras variables are real numbers; refusing to drop the imaginary part"
                )


class _PlanWalk(GraphWalker[int]):
    """The plan's client of the graph walk: a step per node, values are slot numbers."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    def run_node(self, visit: Visit, env: dict[TensorRef, int], masks: dict[TensorRef, Any] | None) -> None:
        self.runner._compile_node(visit, env)

    def missing_inputs(self, visit: Visit, missing: Sequence[TensorRef]) -> None:
        self.runner._problem(
            visit.path,
            visit.layer.class_name,
            RunError(f"node {visit.node} reads {[str(r) for r in missing]}, which nothing computes"),
        )

    def bad_call(self, visit: Visit, reason: str) -> None:
        self.runner._problem(visit.path, visit.layer.class_name, RunError(f"node {visit.node} {reason}"))

    def model_done(self, visit: Visit, outs: Sequence[tuple[int, int]]) -> None:
        runner = self.runner
        runner.steps.append(
            runner._call_step(
                "model",
                visit.layer,
                visit.node,
                visit.path,
                in_slots=tuple(s for _, s in outs),
                out_slots=tuple(outs),
            )
        )


class Runner:
    """A model compiled into a plan; :meth:`run` executes it with NumPy.

    ``Runner(graph)`` raises the first problem (an :class:`UnsupportedError` for a missing kernel
    or option) unless ``strict=False``; :meth:`check` lists every problem at once. With ``fuse``
    (the default) Conv/Dense -> BatchNormalization -> ReLU chains run as one kernel
    (:mod:`modelgraph.runner.fusion`); a run that asks for intermediates uses the unfused plan.
    ``backend="onnxruntime"`` runs the model exported to ONNX in memory on onnxruntime instead of the
    plan (the same feeds, casts, outputs and batching; no intermediates or profile; no kernels are
    built); ``"auto"`` does so when onnxruntime is installed and the model exports, else builds the
    NumPy plan (:mod:`modelgraph.runner.backends`). With
    ``reference`` every layer runs its plain reference kernel (no fast kernel, no fusion), see
    :mod:`modelgraph.runner.fast`. ``threads`` pins the run's thread count (runner and BLAS; the
    onnxruntime session's intra-op threads); by default :mod:`modelgraph.runner.threads` decides it
    at every run from the cores the process may use and the load on them.
    """

    def __init__(
        self,
        model: ModelGraph | str,
        *,
        weights: str | None = None,
        strict: bool = True,
        fuse: bool = True,
        backend: str = "numpy",
        reference: bool = False,
        threads: int | None = None,
    ) -> None:
        if threads is not None:
            threads = _positive_threads(threads)
        self.threads = threads
        if not isinstance(model, ModelGraph):
            from modelgraph.loading import load

            model = load(model, weights=weights)
        self.graph = model
        self._strict = strict
        self.reference = reference
        _refuse_complex_weights(model)
        # Another executor for the same feeds and outputs (modelgraph.runner.backends), chosen first:
        # with one, the plan only binds the feeds and names the outputs (no kernels are built).
        from modelgraph.runner.backends import select_backend

        # Notes for the user (``auto`` running NumPy after onnxruntime could not, and why).
        self.notes: list[str] = []
        self._auto = backend == "auto"
        self._fuse = fuse
        self._numpy_fallback: Runner | None = None  # ``auto`` after onnxruntime failed at run time
        self._session = select_backend(backend, model, self.notes, threads=threads)
        self.backend = "numpy" if self._session is None else self._session.name
        plan_kernels = self._session is None
        self._plan_graph = fuse_graph(model) if fuse and not reference and plan_kernels else model
        # Fusion removes layers (at any nesting level); then some layers have no tensors of their own.
        self._fused = sum(1 for _ in self._plan_graph.walk()) != sum(1 for _ in model.walk())
        self._unfused_runner: Runner | None = None
        self.keras_version = keras_version_tuple(model.keras_version)
        self.keras_major = model.keras_major
        self.steps: list[Step] = []
        self.problems: list[Problem] = []
        self._problem_keys: set[tuple[str, str]] = set()  # (path, message) of each problem, once
        self.inputs: list[InputSpec] = []
        self._input_slots: list[int] = []
        self._input_dtypes: list[str] = []
        self._nslots = 0
        self._kernels: dict[tuple[int, str], tuple[Callable[..., Any], dt.Policy] | None] = {}
        self._weight_bytes = 0
        self._mask_slots: set[int] = set()
        # Per input shapes: whether the plan's independent steps run side by side, decided from that
        # shape's own serial and trial runs with several threads (see runner/schedule.py).
        self._schedules: dict[tuple[tuple[int, ...], ...], ShapeSchedule] = {}
        self._steps_graph: StepGraph | None = None
        # RNN layers (or wrappers of one) saved with stateful=True, by path.
        self.stateful_layers: list[str] = []
        for path, layer in model.walk():
            name = "/".join(path)
            # The merged steps' class names are the plan's own: a file's layer may not claim one.
            if layer.class_name.startswith(FUSED_PREFIX):
                self._problem(name, layer.class_name, UnsupportedLayerError(layer.class_name, name))
            if _stateful(layer.config):
                self.stateful_layers.append(name)
        if plan_kernels:
            self._compile()
        else:
            self._bind_inputs(model)
            self._name_outputs(model)
        if strict and self.problems:
            if not model.has_weights and any(isinstance(p.error, WeightsError) for p in self.problems):
                raise config_only_model(model.source or model.name)
            raise self.problems[0].error

    @property
    def backend_session(self) -> Any:
        """The session of a non-NumPy backend (its ``export_seconds``, ``load_seconds``), or None."""
        return self._session

    # --- compilation ------------------------------------------------------------------------------

    def _new_slot(self) -> int:
        self._nslots += 1
        return self._nslots - 1

    def _compile(self) -> None:
        g = self._plan_graph
        env = self._bind_inputs(g)
        _PlanWalk(self).walk(g, env)
        self.output_slots: list[int] = []
        for ref in g.outputs:
            if ref not in env:
                self._problem(ref.layer, "?", RunError(f"model output {ref} is not computed by any node"))
                self.output_slots.append(-1)
            else:
                self.output_slots.append(env[ref])
        # Named after the model's own outputs: a fused plan may end in the layer a BatchNormalization
        # or activation was folded into, but the output (and the unfused run taps use) keeps Keras's name.
        self._name_outputs(self.graph)
        self._compute_liveness()

    def _bind_inputs(self, g: ModelGraph) -> dict[TensorRef, int]:
        """A slot and an :class:`InputSpec` (shape, dtype) per model input: what feeds are bound to."""
        env: dict[TensorRef, int] = {}
        for ref in g.inputs:
            layer = g.layer(ref.layer)
            slot = self._new_slot()
            env[ref] = slot
            shape = layer.config.get("batch_shape", layer.config.get("batch_input_shape"))
            if shape is not None and not is_size_list(shape):
                raise ConfigError(
                    f"input layer '{ref.layer}' declares shape {shape!r}: not a list of sizes and nulls"
                )
            self.inputs.append(
                InputSpec(ref.layer, None if shape is None else tuple(shape), dt.input_dtype(layer.config))
            )
            self._input_slots.append(slot)
            self._input_dtypes.append(self.inputs[-1].dtype)
        return env

    def _name_outputs(self, g: ModelGraph) -> None:
        """The outputs' names, and the other names ``--expect`` may give them."""
        self.output_keys = output_keys(g.outputs)
        self.output_aliases, self.output_config_names = _output_aliases(g, self.output_keys)

    def _problem(self, path: str, class_name: str, error: BaseException) -> None:
        key = (path, str(error))
        if key in self._problem_keys:  # a set: a model with thousands of problems stays linear
            return
        self._problem_keys.add(key)
        self.problems.append(Problem(path, class_name, error))

    def _call_step(self, kind: str, layer: Layer, node: Node, path: str, **fields: Any) -> Step:
        """The next step, for ``node`` of ``layer`` at ``path``: the fields every call's step has, and ``fields``."""
        return Step(
            index=len(self.steps),
            kind=kind,
            label=f"{path}[{node.index}]",
            path=path,
            plain_path=_plain(path),
            class_name=layer.class_name,
            node_index=node.index,
            shared=layer.node_count > 1,
            depth=node.depth or 0,
            **fields,
        )

    def _build_kernel(
        self, graph: ModelGraph, layer: Layer, path: str
    ) -> tuple[Callable[..., Any], dt.Policy] | None:
        cache_key = (id(graph), layer.name)
        if cache_key in self._kernels:
            return self._kernels[cache_key]
        self._kernels[cache_key] = None
        key = layer.key
        try:
            entry = get_entry(key, path)
            policy = dt.FLOAT32
            if has_dtype_policy(layer):
                policy = dt.resolve_policy(layer.config.get("dtype"), layer.class_name, path)
            transform = None
            if policy.is_half and not float32_variables(key):
                half = policy.compute_dtype

                def transform(a: np.ndarray, half: str = half) -> np.ndarray:
                    return dt.weight_to_compute(a, half)

            weights = LazyWeights(layer.weights, transform)
            spec = KernelSpec(
                name=layer.name,
                class_name=layer.class_name,
                config=layer.config,
                weights=weights,
                keras_version=self.keras_version,
                compute_dtype=policy.compute_dtype,
            )
            if policy.quantization is not None:
                fn = quantized_kernel(spec, policy.quantization)
            elif self.reference:
                fn = entry.factory(spec)
            else:
                fn = fast.build(entry.factory, spec)
            weights.release()
            self._weight_bytes += weights.nbytes
        except ModelGraphError as exc:
            self._problem(path, layer.class_name, exc)
            return None
        except Exception as exc:  # noqa: BLE001 - a kernel factory failed: name the layer, keep the cause
            err = KernelError(f"{path} (building the kernel)", layer.class_name, "n/a", exc)
            err.__cause__ = exc
            self._problem(path, layer.class_name, err)
            return None
        self._kernels[cache_key] = (fn, policy)
        return fn, policy

    def _compile_node(self, visit: Visit, env: dict[TensorRef, int]) -> None:
        graph, layer, node, path = visit.graph, visit.layer, visit.node, visit.path
        built = self._build_kernel(graph, layer, path)
        if built is not None and visit.refuses_training():
            self._problem(
                path, layer.class_name, UnsupportedConfigError(layer.class_name, "training", True, path)
            )
            built = None
        # Call template: tensors -> slots; drop training and mask=None.
        kwargs = call_kwargs(node)

        def slot(ref: TensorRef) -> _In:
            return _In(env[ref])

        args_t = tuple(map_refs(a, slot) for a in node.args)
        kwargs_t = {k: map_refs(v, slot) for k, v in kwargs.items()}
        simple = None
        if not kwargs_t and all(isinstance(a, _In) for a in args_t):
            simple = tuple(a.slot for a in args_t)
        in_slots = tuple(env[r] for r in node.inputs if r in env)

        # Output slots: one per tensor of this node that anything reads (or the model outputs).
        out_slots: list[tuple[int, int]] = []
        for t in visit.scope.referenced_outputs(node):
            slot = self._new_slot()
            env[TensorRef(layer.name, node.index, t)] = slot
            out_slots.append((t, slot))

        step = self._call_step(
            "kernel",
            layer,
            node,
            path,
            fn=None if built is None else built[0],
            args=args_t,
            kwargs=kwargs_t,
            simple=simple,
            in_slots=in_slots,
            out_slots=tuple(out_slots),
        )
        if built is not None:
            policy = built[1]
            if policy.is_half:
                step.compute_dtype = policy.compute_dtype
                step.round_outputs = policy.compute_dtype
            elif policy.compute_dtype == "float64":
                step.compute_dtype = "float64"
        if layer.kind == "layer":
            rule = mk.rule_for_node(
                layer.class_name, layer.config, self.keras_major, node.args, kwargs, node.inputs
            )
            flat = [env.get(r, -1) for r in node.inputs]
            cleared = visit.hidden_masks(self.keras_major)
            hidden = frozenset(i for i, r in enumerate(node.inputs) if r in cleared)
            has_in_mask = any(s in self._mask_slots for i, s in enumerate(flat) if i not in hidden)
            # tf.keras: a mask given in the call wins; Keras 3's rule already leaves it alone.
            explicit = "mask" in kwargs and self.keras_major < 3
            if has_in_mask and rule.consume is not None and not explicit:
                step.mask_consume = rule.consume
            if rule.produce is not None and (has_in_mask or rule.source):
                step.mask_produce = rule.produce
                self._mask_slots.update(s for _, s in out_slots)
            if step.mask_consume is not None or step.mask_produce is not None:
                step.mask_inputs = tuple(flat)
                step.mask_hidden = hidden
        self.steps.append(step)

    def _compute_liveness(self) -> None:
        last: dict[int, int] = {}
        for step in self.steps:
            for s in step.in_slots:
                last[s] = step.index
            for s in step.mask_inputs:
                if s >= 0:
                    last[s] = step.index
            for _, s in step.out_slots:
                last.setdefault(s, step.index)
        keep = set(self.output_slots)
        frees: dict[int, list[int]] = {}
        for s, i in last.items():
            if s in keep:
                continue
            frees.setdefault(i, []).append(s)
        for step in self.steps:
            step.free = tuple(frees.get(step.index, ()))
        # Inputs nothing reads are dropped at once.
        self._unused_inputs = [s for s in self._input_slots if s not in last and s not in keep]

    # --- introspection ----------------------------------------------------------------------------

    def check(self) -> list[Problem]:
        """Every problem found while compiling (unsupported layers and options first)."""
        return sorted(self.problems, key=lambda p: (not p.unsupported,))

    @property
    def input_names(self) -> list[str]:
        return [i.name for i in self.inputs]

    @property
    def weight_bytes(self) -> int:
        return self._weight_bytes

    def _unfused(self) -> Runner:
        """The plain plan (no fusion), built on first need: every layer keeps its own tensor."""
        if self._unfused_runner is None:
            self._unfused_runner = Runner(
                self.graph, strict=self._strict, fuse=False, reference=self.reference, threads=self.threads
            )
        return self._unfused_runner

    def layer_paths(self) -> list[str]:
        """Every tappable layer path, in plan order (fused-away layers included)."""
        if self._fused:
            return self._unfused().layer_paths()
        seen: dict[str, None] = {}
        for step in self.steps:
            seen.setdefault(step.plain_path, None)
        return list(seen)

    def _resolve_taps(self, taps: Sequence[str] | None, all_intermediates: bool) -> set[int] | None:
        """Indices of the steps whose outputs are kept; every name in ``taps`` must name a layer, even
        when ``all_intermediates`` keeps them all (a misspelt tap is a usage error either way)."""
        if not taps and not all_intermediates:
            return None
        chosen: set[int] = set()
        for tap in taps or ():
            path, node, _ = parse_tap_key(tap) if ":" in tap.rsplit("/", 1)[-1] else (tap, None, 0)
            hits = [
                s.index
                for s in self.steps
                if (s.plain_path == path or s.path == path) and (node is None or s.node_index == node)
            ]
            if not hits:
                from modelgraph.errors import did_you_mean

                names = self.layer_paths()
                close = did_you_mean(path, names)
                if close:
                    raise UsageError(f"unknown layer '{tap}' for --tap{close}")
                hint = names if len(names) <= 30 else names[:30] + ["..."]
                raise UsageError(f"unknown layer '{tap}' for --tap; model layers are {hint}")
            chosen.update(hits)
        return {s.index for s in self.steps} if all_intermediates else chosen

    # --- execution --------------------------------------------------------------------------------

    def _bind_feeds(self, feeds: Any) -> list[np.ndarray]:
        names = self.input_names
        if isinstance(feeds, np.ndarray) or (hasattr(feeds, "__array__") and not isinstance(feeds, Mapping)):
            if len(names) != 1:
                raise UsageError(f"the model has {len(names)} inputs {names}; give a dict of arrays by name")
            feeds = {names[0]: feeds}
        elif isinstance(feeds, (list, tuple)):
            if len(feeds) != len(names):
                raise UsageError(f"{len(feeds)} arrays given; model inputs are {names}")
            feeds = dict(zip(names, feeds, strict=True))
        if not isinstance(feeds, Mapping):
            raise UsageError(
                f"feeds must be an array, a list or a dict by input name; got {type(feeds).__name__}"
            )
        unknown = [k for k in feeds if k not in names]
        if unknown:
            raise UsageError(f"unknown input {unknown[0]!r}; model inputs are {names}")
        missing = [n for n in names if n not in feeds]
        if missing:
            raise UsageError(f"missing input {missing[0]!r}; model inputs are {names}")
        arrays = []
        for spec in self.inputs:
            x = np.asarray(feeds[spec.name])
            if spec.shape is not None:
                if x.ndim != len(spec.shape):
                    raise UsageError(
                        f"input '{spec.name}' expects shape {_fmt_shape(spec.shape)}, got {x.shape}"
                    )
                for have, want in zip(x.shape[1:], spec.shape[1:], strict=True):
                    if want is not None and have != want:
                        raise UsageError(
                            f"input '{spec.name}' expects shape {_fmt_shape(spec.shape)}, got {x.shape}"
                        )
            arrays.append(x)
        return arrays

    def run(
        self,
        feeds: Any,
        *,
        taps: Sequence[str] | None = None,
        all_intermediates: bool = False,
        batch_size: int | None = None,
        profile: Profile | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, np.ndarray]:
        """Outputs by name (and ``tap/...`` intermediates on request) for ``feeds``.

        ``feeds`` is a dict by input layer name, a list in model input order, or one array for a
        single-input model. With ``batch_size`` the inputs are run in slices along the first axis
        (memory-mapped inputs are read one slice at a time) and the results concatenated;
        ``progress(done, total)`` is called after every slice.
        """
        with run_threads(self.threads), jit.fixed_for_run():
            return self._run(feeds, taps, all_intermediates, batch_size, profile, progress)

    def _run(
        self,
        feeds: Any,
        taps: Sequence[str] | None,
        all_intermediates: bool,
        batch_size: int | None,
        profile: Profile | None,
        progress: Callable[[int, int], None] | None,
    ) -> dict[str, np.ndarray]:
        if self.problems:
            raise self.problems[0].error
        if self._session is not None and (taps or all_intermediates or profile is not None):
            raise UsageError(
                f"intermediates (--tap, --all-intermediates) and --profile need the numpy backend, not {self.backend}"
            )
        if self._fused and (taps or all_intermediates):
            # Fused-away layers have no tensors of their own: intermediates come from the plain plan.
            return self._unfused().run(
                feeds,
                taps=taps,
                all_intermediates=all_intermediates,
                batch_size=batch_size,
                profile=profile,
                progress=progress,
            )
        arrays = self._bind_feeds(feeds)
        tapped = self._resolve_taps(taps, all_intermediates)
        if self._session is None:
            # Freed tensors stay in the heap for the next layers' outputs instead of being faulted back
            # in (the plan's own allocations; another backend allocates from its own arena).
            keep_freed_memory()
        n = arrays[0].shape[0] if arrays and arrays[0].ndim else 0
        if batch_size is not None:
            self.check_batching(n, batch_size)
        if batch_size is None or batch_size <= 0 or n <= batch_size:
            out = self._execute([self._cast(a, i) for i, a in enumerate(arrays)], tapped, profile)
            if progress is not None:
                progress(n, n)
            return out
        parts: list[dict[str, np.ndarray]] = []
        for start in range(0, n, batch_size):
            chunk = [self._cast(np.asarray(a[start : start + batch_size]), i) for i, a in enumerate(arrays)]
            parts.append(self._execute(chunk, tapped, profile))
            if progress is not None:
                progress(min(start + batch_size, n), n)
        return {k: np.concatenate([p[k] for p in parts], axis=0) for k in parts[0]}

    def check_inputs(self, shapes: Sequence[tuple[int, ...]], dtypes: Sequence[np.dtype]) -> None:
        """Raise the UsageError a run would for inputs of these shapes and dtypes (in model input
        order), without running: to refuse a streamed input before anything is written."""
        empty = [np.empty((0, *shape[1:]), dtype=dtype) for shape, dtype in zip(shapes, dtypes, strict=True)]
        for i, x in enumerate(self._bind_feeds(empty)):
            self._cast(x, i)

    def check_batching(self, samples: int, batch_size: int) -> None:
        """Refuse to split ``samples`` into batches of ``batch_size`` when the model has stateful RNN
        layers (Keras carries their state from one batch to the next)."""
        if 0 < batch_size < samples and self.stateful_layers:
            raise UsageError(
                f"stateful RNN layer(s) {self.stateful_layers[:3]} carry their state from one batch to the "
                "next in Keras; run the whole input as one batch (no --batch-size)"
            )

    def _onnxruntime_failed(self, exc: Exception) -> None:
        """onnxruntime failed while running: ``auto`` switches to a NumPy plan of the same model for
        this and later runs (with a note); ``onnxruntime`` raises :class:`RunError` (exit 5)."""
        from modelgraph.runner.backends import first_line

        reason = f"onnxruntime failed while running: {first_line(exc)}"
        if not self._auto:
            raise RunError(reason) from exc
        self._numpy_fallback = Runner(
            self.graph, fuse=self._fuse, backend="numpy", reference=self.reference, threads=self.threads
        )
        self.backend = "numpy"
        self.notes.append(f"--backend auto runs NumPy: {reason}")

    def _cast(self, x: np.ndarray, i: int) -> np.ndarray:
        if x.dtype.kind in "cOSUV" and x.dtype.kind != np.dtype(_np_name(self._input_dtypes[i])).kind:
            raise UsageError(
                f"input '{self.inputs[i].name}' has dtype {x.dtype}; the model expects {self._input_dtypes[i]}"
            )
        try:
            return dt.cast_input(x, self._input_dtypes[i])
        except (TypeError, ValueError) as exc:
            raise UsageError(
                f"input '{self.inputs[i].name}' cannot be cast to {self._input_dtypes[i]}: {exc}"
            ) from exc

    def _outputs(self, values: list[Any]) -> dict[str, np.ndarray]:
        """The model's outputs by name, from a run's ``values``."""
        return {
            key: np.asarray(values[slot])
            for key, slot in zip(self.output_keys, self.output_slots, strict=True)
        }

    def _step_graph(self) -> StepGraph:
        if self._steps_graph is None:
            self._steps_graph = StepGraph.of(
                [step.in_slots for step in self.steps],
                [[s for _, s in step.out_slots] for step in self.steps],
            )
        return self._steps_graph

    def _run_side_by_side(self, plan: SideBySide, values: list[Any]) -> None:
        """Run the plan's independent steps side by side (:mod:`modelgraph.runner.schedule`), filling
        ``values``; for a plan without masks, taps or profile."""
        keep = set(self.output_slots)

        def run_step(i: int) -> None:
            step = self.steps[i]
            if step.kind == "model":
                return
            outs = self._call(step, values)
            for t, s in step.out_slots:
                values[s] = outs[t]

        def release(slot: int) -> None:
            if slot not in keep:
                values[slot] = None

        workers = thread_count()
        run_side_by_side(self._step_graph(), plan, workers, blas_threads_now() or workers, run_step, release)

    def _call(
        self, step: Step, values: list[Any], mask_kwargs: dict[str, Any] | None = None
    ) -> tuple[Any, ...]:
        """One kernel step's outputs for the tensors in ``values``, ``mask_kwargs`` (the masks it
        consumes) added to its call."""
        if step.simple is not None:
            args: Any = [values[s] for s in step.simple]
            kwargs: dict[str, Any] = {}
        else:
            args = _fill(step.args, values)
            kwargs = _fill(step.kwargs, values)
        if step.compute_dtype is not None:
            args = _cast_tree(list(args), step.compute_dtype)
            kwargs = _cast_tree(kwargs, step.compute_dtype)
        if mask_kwargs:
            kwargs = {**kwargs, **mask_kwargs}
        try:
            result = step.fn(*args, **kwargs)  # type: ignore[misc]
        except ModelGraphError:
            raise
        except Exception as exc:  # noqa: BLE001 - name the node, keep the cause
            raise KernelError(
                step.label, step.class_name, _shapes(list(args) + ([kwargs] if kwargs else [])), exc
            ) from exc
        outs = result if isinstance(result, (tuple, list)) else (result,)
        if step.round_outputs is not None:
            outs = tuple(dt.to_compute(np.asarray(o), step.round_outputs) for o in outs)
        for t, _ in step.out_slots:
            if t >= len(outs):
                err = IndexError(f"the kernel returned {len(outs)} outputs; tensor {t} is referenced")
                raise KernelError(step.label, step.class_name, _shapes(list(args)), err) from err
        return tuple(outs)

    def _execute(
        self, arrays: list[np.ndarray], tapped: set[int] | None, profile: Profile | None
    ) -> dict[str, np.ndarray]:
        if self._session is not None:
            if self._numpy_fallback is None:
                try:
                    return dict(zip(self.output_keys, self._session.run(arrays), strict=True))
                except Exception as exc:  # noqa: BLE001 - onnxruntime's own run-time errors
                    self._onnxruntime_failed(exc)
            assert self._numpy_fallback is not None
            return self._numpy_fallback._execute(arrays, tapped, profile)
        values: list[Any] = [None] * self._nslots
        masks: list[Any] | None = [None] * self._nslots if self._mask_slots else None
        for slot, x in zip(self._input_slots, arrays, strict=True):
            values[slot] = x
        for slot in self._unused_inputs:
            values[slot] = None
        taps: dict[str, np.ndarray] = {}
        prof_steps: list[StepProfile] | None = None
        live = 0
        if profile is not None:
            if not profile.steps:
                profile.steps = [StepProfile(s.label, s.path, s.class_name) for s in self.steps]
                profile.weight_bytes = self._weight_bytes
            profile.threads = thread_count()
            prof_steps = profile.steps
            live = sum(_nbytes(a) for a in arrays)
            t_start = time.perf_counter()
        schedule: ShapeSchedule | None = None
        timing: list[float] | None = None
        if masks is None and tapped is None and profile is None and thread_count() > 1:
            schedule = self._schedules.setdefault(tuple(a.shape for a in arrays), ShapeSchedule(TIMED_RUNS))
            side = schedule.plan()
            if side is not None:
                t_side = time.perf_counter()
                self._run_side_by_side(side, values)
                schedule.trial_done(time.perf_counter() - t_side)
                return self._outputs(values)
            # The first run of a shape warms up (scratch buffers, compiled loops); the next ones are timed.
            timing = schedule.serial_timing(len(self.steps))
            t_serial = time.perf_counter()
        for step in self.steps:
            if step.kind == "model":
                if tapped is not None and step.index in tapped:
                    n_out = len(step.out_slots)
                    for t, s in step.out_slots:
                        taps[_tap_key(step.path, step.node_index, t, step.shared, n_out)] = values[s]
                continue
            if profile is not None or timing is not None:
                t0 = time.perf_counter()
            in_masks = None
            mask_kwargs = None
            if masks is not None and (step.mask_consume is not None or step.mask_produce is not None):
                in_masks = [
                    masks[s] if s >= 0 and i not in step.mask_hidden else None
                    for i, s in enumerate(step.mask_inputs)
                ]
                if step.mask_consume is not None:
                    mask_kwargs = step.mask_consume(in_masks)
            outs = self._call(step, values, mask_kwargs)
            for t, s in step.out_slots:
                values[s] = outs[t]
            if in_masks is not None and step.mask_produce is not None and masks is not None:
                flat_inputs = [values[s] if s >= 0 else None for s in step.mask_inputs]
                produced = step.mask_produce(in_masks, flat_inputs, list(outs))
                for t, s in step.out_slots:
                    masks[s] = produced[t] if t < len(produced) else None
            if timing is not None:
                timing[step.index] = time.perf_counter() - t0
            if tapped is not None and step.index in tapped:
                n_out = len(outs)
                for t, o in enumerate(outs):
                    taps[_tap_key(step.path, step.node_index, t, step.shared, n_out)] = np.asarray(o)
            if prof_steps is not None:
                elapsed = time.perf_counter() - t0
                out_bytes = sum(_nbytes(values[s]) for _, s in step.out_slots)
                live += out_bytes
                sp = prof_steps[step.index]
                sp.seconds += elapsed
                sp.output_bytes = max(sp.output_bytes, out_bytes)
                sp.live_bytes = max(sp.live_bytes, live)
                sp.calls += 1
                profile.peak_live_bytes = max(profile.peak_live_bytes, live)  # type: ignore[union-attr]
            for s in step.free:
                if prof_steps is not None:
                    live -= _nbytes(values[s])
                values[s] = None
                if masks is not None:
                    masks[s] = None
        if schedule is not None and timing is not None:
            schedule.serial_done(timing, time.perf_counter() - t_serial, self._step_graph(), thread_count())
        result_map = {**self._outputs(values), **taps}
        if profile is not None:
            profile.total_seconds += time.perf_counter() - t_start
        return result_map


def _np_name(dtype: str) -> str:
    return "float32" if dtype == "bfloat16" else dtype


def _fmt_shape(shape: Sequence[int | None]) -> str:
    return (
        "("
        + ", ".join("None" if d is None else str(d) for d in shape)
        + ("," if len(shape) == 1 else "")
        + ")"
    )


def _output_aliases(graph: ModelGraph, keys: Sequence[str]) -> tuple[dict[str, int], dict[str, int]]:
    """Other names of the outputs, for ``--expect`` references: (the bracket form of the output
    keys' own numbering, ``enc[1][0]`` for ``enc:1:0``; every name in a config's numbering).

    Output keys number a nested model's calls as Keras 3 shows them after reloading; a config (tf.keras
    and Keras 3) counts the nested model's own first node too, so ``["enc", 2, 0]`` there is
    ``enc:1:0`` here. The two numberings overlap (``enc:1:0`` is a name in both), so a reference is
    read in the config's numbering only when one of its keys exists in no other (see
    :func:`modelgraph.runner.compare.output_aliases_for`)."""
    own: dict[str, int] = {}
    config: dict[str, int] = {}
    for i, ref in enumerate(graph.outputs):
        own.setdefault(f"{ref.layer}[{ref.node_index}][{ref.tensor_index}]", i)
        if graph.layer(ref.layer).subgraph is not None:
            node = ref.node_index + 1
            config.setdefault(f"{ref.layer}:{node}:{ref.tensor_index}", i)
            config.setdefault(f"{ref.layer}[{node}][{ref.tensor_index}]", i)
    own = {k: v for k, v in own.items() if k not in keys}
    return own, config


def unsupported(graph: ModelGraph | str) -> list[Problem]:
    """Every unsupported layer or option of a model, found without running it."""
    runner = Runner(graph, strict=False)
    return [p for p in runner.check() if p.unsupported]
