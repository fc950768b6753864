"""Kernels: merge family (see modelgraph/runner/registry.py for the contract).

Merge layers are called with ONE list argument, ``fn([a, b, ...])``. Element-wise merges broadcast
like Keras's ``Merge.call``: when ranks differ, the lower-rank inputs get size-1 axes inserted at
axis 1 (after the batch axis) until the ranks match, then ordinary broadcasting applies.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from modelgraph.errors import UnsupportedConfigError
from modelgraph.runner.kernels.core import as_float, check_keys, flag, l2_normalize
from modelgraph.runner.registry import Kernel, KernelSpec, register


def merge_inputs(spec: KernelSpec, args: tuple) -> list[np.ndarray]:
    """A merge layer's inputs as arrays: one list argument or several positional ones."""
    if len(args) == 1 and isinstance(args[0], list | tuple):
        items = list(args[0])
    else:
        items = list(args)
    if not items:
        raise ValueError(f"{spec.class_name} '{spec.name}' was called without inputs")
    return [np.asarray(x) for x in items]


def same_rank(xs: list[np.ndarray]) -> list[np.ndarray]:
    """The inputs brought to the highest rank among them by inserting axes at 1 (Keras's _Merge)."""
    top = max(x.ndim for x in xs)
    out = []
    for x in xs:
        while x.ndim < top:
            x = np.expand_dims(x, 1)
        out.append(x)
    return out


MaskedMerge = Callable[[list[np.ndarray], list[np.ndarray | None]], np.ndarray]


def _elementwise(
    reduce: Callable[[list[np.ndarray]], np.ndarray],
    exactly: int | None = None,
    masked: MaskedMerge | None = None,
):
    """``masked`` is the Keras 3 merge that reads its inputs' masks (``input_masks``, one per input,
    given by the runner's mask rules: runner/masks.py)."""

    def factory(spec: KernelSpec) -> Kernel:
        check_keys(spec, set())

        def run(*args: object, input_masks: Sequence[object] | None = None) -> np.ndarray:
            xs = merge_inputs(spec, args)
            if exactly is not None and len(xs) != exactly:
                raise ValueError(f"A {spec.class_name} layer takes exactly {exactly} inputs; got {len(xs)}")
            if len(xs) < 1:
                raise ValueError(f"{spec.class_name} needs at least one input")
            xs = same_rank(xs)
            if masked is not None and input_masks is not None and any(m is not None for m in input_masks):
                masks = [
                    None if m is None else np.broadcast_to(np.expand_dims(np.asarray(m, bool), -1), x.shape)
                    for m, x in zip(input_masks, xs, strict=True)
                ]
                return masked(xs, masks)
            return reduce(xs)

        return run

    return factory


def _masked_extremum(op: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> MaskedMerge:
    """Keras 3 Maximum/Minimum (``Merge._apply_merge_op_and_or_mask``): a masked position takes the
    other operand's value, so only unmasked values compete."""

    def merge(xs: list[np.ndarray], masks: list[np.ndarray | None]) -> np.ndarray:
        out, out_mask = xs[0], masks[0]
        for x, m in zip(xs[1:], masks[1:], strict=True):
            if m is not None:
                x = np.where(m, x, out)
            if out_mask is not None:
                out = np.where(out_mask, out, x)
            out_mask = None if m is None or out_mask is None else out_mask | m
            out = op(out, x)
        return out

    return merge


def _masked_prod(xs: list[np.ndarray], masks: list[np.ndarray | None]) -> np.ndarray:
    """Keras 3 Multiply: a masked position counts as 1; when every input is masked, positions no
    input keeps are 0."""
    every = all(m is not None for m in masks)
    out: np.ndarray | None = None
    keep: np.ndarray | None = None
    for x, m in zip(xs, masks, strict=True):
        if m is not None:
            x = np.where(m, x, x.dtype.type(1))
            if every:
                keep = m if keep is None else keep | m
        out = x if out is None else out * x
    assert out is not None
    if every and keep is not None:
        out = np.where(keep, out, out.dtype.type(0))
    return out


def sum_inputs(xs: Sequence[np.ndarray]) -> np.ndarray:
    """The inputs added in order (Keras's Add: left to right, so float rounding matches)."""
    out = xs[0]
    for x in xs[1:]:
        out = out + x
    return out


def _prod(xs: Sequence[np.ndarray]) -> np.ndarray:
    out = xs[0]
    for x in xs[1:]:
        out = out * x
    return out


def _maximum(xs: Sequence[np.ndarray]) -> np.ndarray:
    out = xs[0]
    for x in xs[1:]:
        out = np.maximum(out, x)
    return out


def _minimum(xs: Sequence[np.ndarray]) -> np.ndarray:
    out = xs[0]
    for x in xs[1:]:
        out = np.minimum(out, x)
    return out


def _average(xs: Sequence[np.ndarray]) -> np.ndarray:
    return sum_inputs(xs) / len(xs)


register("Add")(_elementwise(sum_inputs))
register("Subtract")(_elementwise(lambda xs: xs[0] - xs[1], exactly=2))
# Named: the squeeze-excite fusion pass recognises a Multiply by its kernel.
multiply = register("Multiply")(_elementwise(_prod, masked=_masked_prod))
register("Average")(_elementwise(_average))
register("Maximum")(_elementwise(_maximum, masked=_masked_extremum(np.maximum)))
register("Minimum")(_elementwise(_minimum, masked=_masked_extremum(np.minimum)))


@register("Concatenate")
def concatenate(spec: KernelSpec) -> Kernel:
    check_keys(spec, {"axis"})
    axis = spec.get("axis", -1)
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise UnsupportedConfigError(spec.class_name, "axis", axis, spec.name)

    def run(*args: object) -> np.ndarray:
        return np.concatenate(merge_inputs(spec, args), axis=axis)

    return run


def _batch_dot(x: np.ndarray, y: np.ndarray, ax: int, ay: int) -> np.ndarray:
    """Contract x's axis ``ax`` with y's axis ``ay`` per batch item; Keras's ``batch_dot`` shapes."""
    batch = x.shape[0]
    xm = np.moveaxis(x, ax, -1)
    ym = np.moveaxis(y, ay, 1)
    x_rest, y_rest = xm.shape[1:-1], ym.shape[2:]
    out = np.matmul(xm.reshape(batch, -1, xm.shape[-1]), ym.reshape(batch, ym.shape[1], -1))
    out = out.reshape((batch, *x_rest, *y_rest))
    if x.ndim == 2 and y.ndim == 2:
        out = out.reshape(batch, 1)  # Keras keeps a trailing axis of size 1
    return out


@register("Dot")
def dot(spec: KernelSpec) -> Kernel:
    check_keys(spec, {"axes", "normalize"})
    axes = spec.get("axes")
    ok = (isinstance(axes, int) and not isinstance(axes, bool)) or (
        isinstance(axes, list | tuple) and len(axes) == 2 and all(isinstance(a, int) for a in axes)
    )
    if not ok:
        raise UnsupportedConfigError(spec.class_name, "axes", axes, spec.name)
    normalize = flag(spec, "normalize", False)
    keras3 = spec.keras_version[0] >= 3

    def run(*args: object) -> np.ndarray:
        xs = merge_inputs(spec, args)
        if len(xs) != 2:
            raise ValueError(f"A Dot layer takes exactly 2 inputs; got {len(xs)}")
        x, y = as_float(xs[0]), as_float(xs[1])
        pair = [axes, axes] if isinstance(axes, int) else list(axes)
        ax, ay = pair[0] % x.ndim, pair[1] % y.ndim
        if ax == 0 or ay == 0:
            raise ValueError("Dot cannot contract the batch axis 0")
        if x.shape[ax] != y.shape[ay]:
            raise ValueError(f"Dot axes {pair} do not match: {x.shape} vs {y.shape}")
        if normalize:
            # Keras 3 calls keras.ops.normalize with its default epsilon, 1e-7.
            x = l2_normalize(x, ax, keras3, keras3_cap=1e7)
            y = l2_normalize(y, ay, keras3, keras3_cap=1e7)
        return _batch_dot(x, y, ax, ay)

    return run
