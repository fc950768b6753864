"""The shape-rule registry and the small dimension algebra every rule uses.

A *shape rule* computes a node's output shapes from its call (config + input tensors); a *weight
rule* computes the weight shapes Keras would create for a layer built on given input shapes.
Rules attach to the catalogue entry (:mod:`modelgraph.catalogue`) of their key:

* a layer class name (``"Dense"``),
* ``"op:<ClassName>"`` for Keras 3 raw-op nodes (their class names clash with layers),
* ``"tf:<function>"`` for tf.keras ``TFOpLambda``/``SlicingOpLambda`` (``"tf:math.multiply"``).

Shapes are tuples with ``None`` for an unknown dimension (the batch is ``None``); an unknown *rank*
is ``None`` instead of a tuple. Rules signal a broken model with :class:`ShapeError` (recorded as a
problem by the driver) and an input they cannot work with because it is unknown with
:class:`Unknown` (silently yields unknown outputs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from modelgraph import catalogue
from modelgraph.catalogue.spec import NO_VARIABLES
from modelgraph.errors import ShapeError, Unknown
from modelgraph.graph import flatten_structure, format_shape

Dim = int | None
Shape = tuple[Dim, ...]


@dataclass(frozen=True)
class TensorSpec:
    """One symbolic tensor: its shape (None = unknown rank) and dtype (None = unknown)."""

    shape: Shape | None
    dtype: str | None = "float32"

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)


@dataclass
class Call:
    """What a rule sees of one node: the layer's config and the call with tensors as TensorSpec."""

    name: str
    class_name: str
    config: Mapping[str, Any]
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    inputs: list[TensorSpec]
    keras_major: int = 3
    weights: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    notes: list[tuple[str, str, str]] = field(default_factory=list)
    out_dtypes: list[str | None] | None = None

    # --- config access --------------------------------------------------------------------------
    def get(self, key: str, default: Any = None, *aliases: str) -> Any:
        """A config value (first of ``key``/``aliases`` present and not None), else ``default``."""
        for k in (key, *aliases):
            value = self.config.get(k)
            if value is not None:
                return value
        return default

    def note(self, message: str, kind: str, severity: str = "warning") -> None:
        self.notes.append((message, kind, severity))

    # --- tensor access --------------------------------------------------------------------------
    def arg_tensors(self) -> list[TensorSpec]:
        """Tensors of the positional arguments, flattened (kwargs such as ``mask`` excluded)."""
        return [v for v in flatten(self.args) if isinstance(v, TensorSpec)]

    def first(self) -> TensorSpec:
        """The first positional tensor (the usual single input)."""
        tensors = self.arg_tensors() or self.inputs
        if not tensors:
            raise ShapeError(f"'{self.name}' is called without a tensor input", "arity")
        return tensors[0]

    def x(self) -> Shape:
        """Shape of the single input; :class:`Unknown` when its rank is unknown."""
        return need(self.first())

    def param(self, position: int, name: str, default: Any = None) -> Any:
        """A call argument by position or keyword (Keras 2 list nodes keep only the first positional)."""
        if len(self.args) > position:
            return self.args[position]
        return self.kwargs.get(name, default)

    @property
    def compute_dtype(self) -> str:
        return compute_dtype(self.config.get("dtype"))


RuleFn = Callable[[Call], Any]
WeightFn = Callable[[Mapping[str, Any], list[Shape | None]], dict[str, Shape]]


def shape_rule(*names: str) -> Callable[[RuleFn], RuleFn]:
    """Attach a shape rule to the catalogue entries of these keys (class names, ``op:X``, ``tf:fn``)."""
    return catalogue.provides("shape", *names)


def weight_rule(*names: str) -> Callable[[WeightFn], WeightFn]:
    """Attach an expected-weights rule ``(config, input_shapes) -> {canonical name: shape}``."""
    return catalogue.provides("weight_shapes", *names)


# ------------------------------------------------------------------------------------------------
# Structures


def flatten(value: Any) -> list[Any]:
    """Keras's ``tree.flatten`` order, keeping each :class:`TensorSpec` whole."""
    return flatten_structure(value, is_leaf=lambda item: isinstance(item, TensorSpec))


# ------------------------------------------------------------------------------------------------
# Dimension algebra


def need(spec: TensorSpec | Shape | None) -> Shape:
    """The shape, or :class:`Unknown` when the rank is unknown."""
    shape = spec.shape if isinstance(spec, TensorSpec) else spec
    if shape is None:
        raise Unknown()
    return shape


def need_rank(shape: Shape, ranks: Iterable[int] | int, who: str) -> Shape:
    allowed = (ranks,) if isinstance(ranks, int) else tuple(ranks)
    if len(shape) not in allowed:
        want = " or ".join(str(r) for r in allowed)
        raise ShapeError(
            f"{who} expects a rank-{want} input (batch included), got shape {fmt(shape)}", "rank"
        )
    return shape


def fmt(shape: Shape | None) -> str:
    return format_shape(shape, unknown="<unknown rank>")


def prod(dims: Iterable[Dim]) -> Dim:
    n = 1
    for d in dims:
        if d is None:
            return None
        n *= d
    return n


def dadd(*dims: Dim) -> Dim:
    if any(d is None for d in dims):
        return None
    return sum(d for d in dims if d is not None)


def dmul(a: Dim, b: Dim) -> Dim:
    return None if a is None or b is None else a * b


def same_dim(a: Dim, b: Dim) -> bool:
    """Compatible: equal, or one unknown."""
    return a is None or b is None or a == b


def merge_dim(a: Dim, b: Dim) -> Dim:
    return a if a is not None else b


def axis_index(axis: Any, rank: int, who: str = "axis") -> int:
    try:
        a = int(axis)
    except (TypeError, ValueError):
        raise ShapeError(f"{who} {axis!r} is not an integer", "config") from None
    if not -rank <= a < rank:
        raise ShapeError(f"{who} {a} is out of range for a rank-{rank} tensor", "axis")
    return a % rank


def broadcast(a: Shape, b: Shape, who: str = "inputs") -> Shape:
    """NumPy broadcasting; an unknown dim against a known d > 1 gives d (or the op fails)."""
    out: list[Dim] = []
    la, lb = len(a), len(b)
    for i in range(max(la, lb)):
        x = a[la - 1 - i] if i < la else 1
        y = b[lb - 1 - i] if i < lb else 1
        if x == 1:
            out.append(y)
        elif y == 1:
            out.append(x)
        elif x is None or y is None:
            known = x if x is not None else y
            out.append(known)
        elif x == y:
            out.append(x)
        else:
            raise ShapeError(f"{who} have incompatible shapes {fmt(a)} and {fmt(b)}", "broadcast")
    return tuple(reversed(out))


def as_tuple(value: Any, n: int, who: str) -> tuple[int, ...]:
    """``3`` -> ``(3, 3)``; lists pass through when their length is ``n``."""
    if isinstance(value, bool):
        raise ShapeError(f"{who} {value!r} is not an integer", "config")
    if isinstance(value, int):
        return (value,) * n
    if isinstance(value, list | tuple) and len(value) == n and all(isinstance(v, int) for v in value):
        return tuple(value)
    if isinstance(value, list | tuple) and len(value) == 1 and isinstance(value[0], int):
        return (value[0],) * n
    raise ShapeError(f"{who} {value!r} is not {n} integer(s)", "config")


def pairs(value: Any, n: int, who: str) -> tuple[tuple[int, int], ...]:
    """Padding/cropping specs: ``1``, ``(1, 2)`` (symmetric per axis), ``((1, 2), (3, 4))``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return ((value, value),) * n
    if isinstance(value, list | tuple):
        if n == 1 and len(value) == 2 and all(isinstance(v, int) for v in value):
            return ((value[0], value[1]),)
        if len(value) == n:
            out = []
            for v in value:
                if isinstance(v, int) and not isinstance(v, bool):
                    out.append((v, v))
                elif isinstance(v, list | tuple) and len(v) == 2 and all(isinstance(x, int) for x in v):
                    out.append((v[0], v[1]))
                else:
                    raise ShapeError(f"{who} {value!r} is not a valid spec", "config")
            return tuple(out)
    raise ShapeError(f"{who} {value!r} is not a valid spec for {n} axes", "config")


def conv_length(n: Dim, k: int, stride: int, dilation: int, padding: str) -> Dim:
    """Output length of a convolution/pooling window (TF semantics)."""
    if n is None:
        return None
    eff = (k - 1) * dilation + 1
    if padding in ("same", "causal"):
        return -(-n // stride)
    if padding == "valid":
        return (n - eff) // stride + 1
    if padding == "full":
        return (n + eff - 2) // stride + 1
    raise ShapeError(f"padding {padding!r} is not one of 'valid', 'same', 'causal'", "config")


def deconv_length(
    n: Dim, k: int, stride: int, dilation: int, padding: str, output_padding: int | None
) -> Dim:
    """Output length of a transposed convolution (Keras's formula)."""
    if n is None:
        return None
    eff = k + (k - 1) * (dilation - 1)
    if output_padding is None:
        if padding == "valid":
            return n * stride + max(eff - stride, 0)
        if padding == "same":
            return n * stride
        if padding == "full":
            return n * stride - (stride + eff - 2)
        raise ShapeError(f"padding {padding!r} is not 'valid' or 'same'", "config")
    pad = eff // 2 if padding == "same" else (eff - 1 if padding == "full" else 0)
    return (n - 1) * stride + eff - 2 * pad + output_padding


def channels_first(config: Mapping[str, Any]) -> bool:
    fmt_ = config.get("data_format")
    if fmt_ is None:
        ordering = config.get("dim_ordering")  # Keras 1: "th" = channels first
        return ordering == "th"
    return fmt_ == "channels_first"


def split_spatial(shape: Shape, n: int, first: bool) -> tuple[Dim, list[Dim], Dim]:
    """``(batch, [spatial dims], channels)`` of a rank ``n + 2`` shape."""
    if first:
        return shape[0], list(shape[2:]), shape[1]
    return shape[0], list(shape[1:-1]), shape[-1]


def join_spatial(batch: Dim, spatial: Sequence[Dim], channels: Dim, first: bool) -> Shape:
    if first:
        return (batch, channels, *spatial)
    return (batch, *spatial, channels)


# ------------------------------------------------------------------------------------------------
# dtypes

_MIXED = {"mixed_float16": ("float16", "float32"), "mixed_bfloat16": ("bfloat16", "float32")}


def _policy_name(dtype: Any) -> str | None:
    if dtype is None:
        return None
    if isinstance(dtype, str):
        return dtype
    if isinstance(dtype, Mapping):
        cfg = dtype.get("config")
        if isinstance(cfg, Mapping):
            name = cfg.get("name")
            if isinstance(name, str):
                return name
            source = cfg.get("source_name")
            if isinstance(source, str):
                return source
    return None


def compute_dtype(dtype: Any) -> str:
    """The compute dtype of a layer's ``dtype`` config entry (string or DTypePolicy object)."""
    name = _policy_name(dtype) or "float32"
    if name in _MIXED:
        return _MIXED[name][0]
    return name


def variable_dtype(dtype: Any) -> str:
    """The dtype Keras stores a layer's variables in (mixed policies keep float32 variables)."""
    name = _policy_name(dtype) or "float32"
    if name in _MIXED:
        return _MIXED[name][1]
    return name


def is_float(dtype: str | None) -> bool:
    return dtype is None or "float" in dtype


def result_dtype(dtypes: Iterable[str | None]) -> str | None:
    """A simple promotion: any float wins (the widest), else the first integer/bool dtype."""
    seen = [d for d in dtypes if d is not None]
    floats = [d for d in seen if "float" in d]
    if floats:
        return max(floats, key=lambda d: int("".join(ch for ch in d if ch.isdigit()) or 32))
    return seen[0] if seen else None


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# ------------------------------------------------------------------------------------------------
# Running rules for wrapped layers (TimeDistributed, Bidirectional)


# tf.keras convolutions run ``tf.nn.convolution``, which takes extra leading batch axes: a Conv1D
# handed (batch, a, steps, channels) convolves ``steps`` for every (batch, a). TimeDistributed of a
# Conv1D on a rank-5 input relies on it (Keras 3 refuses such a model when it is built).
def extra_batch_axes(class_name: str, rank: int) -> int:
    """How many leading axes after the batch a tf.keras conv of ``class_name`` treats as batch when
    handed an input of ``rank`` (0 for every other class, or an input of the conv's own rank)."""
    spec = catalogue.spec_for(class_name)
    core = spec.leading_batch_rank if spec is not None else None
    return rank - core if core is not None and rank > core else 0


def inner_record(config: Mapping[str, Any], key: str = "layer") -> tuple[str, Mapping[str, Any]] | None:
    """The ``(class_name, config)`` of a wrapped layer record, or None."""
    record = config.get(key)
    if not isinstance(record, Mapping) or not isinstance(record.get("class_name"), str):
        return None
    inner = record.get("config")
    return record["class_name"], inner if isinstance(inner, Mapping) else {}


def run_rule(
    parent: Call, class_name: str, config: Mapping[str, Any], inputs: list[TensorSpec]
) -> list[Shape | None]:
    """Apply the rule of ``class_name`` to ``inputs`` (notes go to ``parent``); a list of outputs."""
    spec = catalogue.spec_for(class_name, "shape")
    rule = spec.shape if spec is not None and callable(spec.shape) else None
    if rule is None:
        parent.note(f"no shape rule for wrapped class '{class_name}'", "unknown_class", "info")
        raise Unknown()
    sub = Call(
        name=f"{parent.name}/{class_name}",
        class_name=class_name,
        config=config,
        args=(inputs[0] if len(inputs) == 1 else list(inputs),),
        kwargs={},
        inputs=list(inputs),
        keras_major=parent.keras_major,
        notes=parent.notes,
    )
    result = rule(sub)
    if isinstance(result, list):
        return result
    return [result]


def is_size_list(value: Any) -> bool:
    """A shape as a config or a weight rule may give it: a list of non-negative ints and Nones."""
    return isinstance(value, list | tuple) and all(
        d is None or (isinstance(d, int) and not isinstance(d, bool) and d >= 0) for d in value
    )


def expected_for(
    class_name: str, config: Mapping[str, Any], ins: list[Shape | None]
) -> dict[str, Shape] | None:
    """Expected weights of ``class_name`` built on ``ins``; None for an unknown class. A malformed
    config that would give anything but sizes and Nones (lists, dicts, negative sizes) raises
    :class:`ShapeError`."""
    spec = catalogue.spec_for(class_name, "weight_shapes")
    rule = None if spec is None else spec.weight_shapes
    if callable(rule):
        weights = _quantized(class_name, config, rule(config, ins))
        for name, shape in weights.items():
            if not is_size_list(shape):
                raise ShapeError(f"{class_name}: weight {name!r} would have shape {shape!r}")
        return weights
    return {} if rule == NO_VARIABLES else None


def quantization_mode(config: Mapping[str, Any]) -> str | None:
    """``"int8"``, ``"int4"``, ``"float8"``... for a Keras 3 quantized dtype policy, else None (the
    block size of ``"int4/128"`` is dropped; see :func:`modelgraph.weight_names.int4_block_size`)."""
    from modelgraph.weight_names import quantization_mode as policy_mode

    mode = policy_mode(config)
    return mode.split("/")[0] if mode else None


def _quantized(class_name: str, config: Mapping[str, Any], weights: dict[str, Shape]) -> dict[str, Shape]:
    """Keras 3 int8/int4 layers store an integer kernel plus a float scale (appended last): the
    class's ``quantized_weight_shapes`` rule, when it has one."""
    mode = quantization_mode(config)
    if mode is None:
        return weights
    spec = catalogue.spec_for(class_name)
    rule = spec.quantized_weight_shapes if spec is not None else None
    return rule(config, mode, weights) if rule is not None else weights


@catalogue.provides("quantized_weight_shapes", "Dense")
def _dense_quantized(config: Mapping[str, Any], mode: str, weights: dict[str, Shape]) -> dict[str, Shape]:
    if "kernel" in weights and mode == "int8":
        weights["kernel_scale"] = (weights["kernel"][1],)
    elif mode == "int4":
        _int4_weights("kernel", True, config, weights)
    return weights


@catalogue.provides("quantized_weight_shapes", "Embedding")
def _embedding_quantized(config: Mapping[str, Any], mode: str, weights: dict[str, Shape]) -> dict[str, Shape]:
    if "embeddings" in weights and mode == "int8":
        weights["embeddings_scale"] = (weights["embeddings"][0],)
    elif mode == "int4":
        _int4_weights("embeddings", False, config, weights)
    return weights


@catalogue.provides("quantized_weight_shapes", "EinsumDense")
def _einsum_dense_quantized(
    config: Mapping[str, Any], mode: str, weights: dict[str, Shape]
) -> dict[str, Shape]:
    if "kernel" not in weights or mode not in ("int8", "int4"):
        return weights
    # The weight rule accepted the equation (a kernel shape came out); Keras 3.15 quantizes only
    # those without an ellipsis.
    equation = str(config.get("equation"))
    if "..." in equation:
        return weights
    if mode == "int8":
        weights["kernel_scale"] = einsum_int8_scale_shape(equation, weights["kernel"])
    else:
        # Keras flattens the kernel to (contracted, other) axes by a plain reshape, then stores it
        # like an int4 Dense kernel.
        weights["kernel"] = einsum_int4_flat_shape(equation, weights["kernel"])
        _int4_weights("kernel", True, config, weights)
    return weights


def _int4_weights(
    name: str, by_input_rows: bool, config: Mapping[str, Any], weights: dict[str, Shape]
) -> None:
    """Keras 3.15's int4 layout of the 2-D variable ``name``: two values per int8 along the output
    axis; per group of ``block_size`` input rows (``by_input_rows``: Dense) or output columns
    (Embedding) a float scale and an int8 zero point plus a float group index per row / column, or
    with ``block_size = -1`` one scale per output channel (per row for Embedding)."""
    from modelgraph.weight_names import int4_block_size

    if name not in weights:
        return
    rows, cols = weights[name]
    weights[name] = (rows, None if cols is None else (cols + 1) // 2)
    block = int4_block_size(config) or -1
    grouped_len = rows if by_input_rows else cols
    groups = None if grouped_len is None or block <= 0 else -(-grouped_len // block)
    if block <= 0:
        weights[f"{name}_scale"] = (cols,) if by_input_rows else (rows,)
        return
    weights[f"{name}_scale"] = weights[f"{name}_zero"] = (groups, cols) if by_input_rows else (rows, groups)
    weights["g_idx"] = (grouped_len,)


def einsum_int4_flat_shape(equation: str, kernel_shape: Shape) -> Shape:
    """``(rows, columns)`` an int4 EinsumDense kernel is flattened to before packing: the product of
    its contracted axes (kernel labels not in the output) and of the others."""
    operands, out = equation.replace(" ", "").split("->")
    weight = operands.split(",")[-1]
    rows: int | None = 1
    columns: int | None = 1
    for label, dim in zip(weight, kernel_shape, strict=False):
        if label in out:
            columns = None if columns is None or dim is None else columns * dim
        else:
            rows = None if rows is None or dim is None else rows * dim
    return (rows, columns)


def einsum_int8_scale_shape(equation: str, kernel_shape: Shape) -> Shape:
    """The ``kernel_scale`` shape Keras 3 gives an int8 EinsumDense: the kernel's shape with its
    contracted axes set to 1, laid out along the output (Keras's own arrangement, which drops a
    contracted axis when the output has no free slot left for it)."""
    operands, out = equation.replace(" ", "").split("->")
    weight = operands.split(",")[1]
    reduced = [i for i, label in enumerate(weight) if label not in out]
    expand = [i for i, label in enumerate(out) if label not in weight]
    transpose = [weight.index(label) for label in out if label in weight]
    squeeze: list[int] = []
    index = 0
    for axis in reduced:
        if expand:
            index = expand.pop(0)
        else:
            squeeze.append(axis)
        transpose.insert(index, axis)
    sizes = [1 if i in reduced else d for i, d in enumerate(kernel_shape)]
    shape = [sizes[a] for a in transpose]
    for a in sorted(expand):
        shape.insert(a, 1)
    for a in sorted(squeeze, reverse=True):
        shape.pop(a)
    return tuple(shape)
