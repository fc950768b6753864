"""Epilogues of the fast kernels: the bias, a merged residual sum and the activation, run on each
output block while it is in cache (relu / relu6 in place without temporaries), and the split of a
layer's activation into the part fused into the channels-last compute and the part left for after."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from modelgraph.runner import rowwise
from modelgraph.runner.activations import Activation, activation_name
from modelgraph.runner.fast import bias_act, sigmoid
from modelgraph.runner.kernels.conv_utils import AXIS_ACTIVATIONS, fused_activation
from modelgraph.runner.registry import KernelSpec

# Where an output block lies in its kernel's output: slices of the leading axes (batch, rows), or
# None where no caller needs it (epilogues without a residual ignore it).
Region = tuple[slice, ...]
Epilogue = Callable[[np.ndarray, Region | None], None]
# ``epilogue(src, dst)``: the epilogue's result written to ``dst`` (see copying_epilogue).
CopyingEpilogue = Callable[[np.ndarray, np.ndarray], None]


# What an activation costs per output element, in GEMM multiply-adds (the unit of for_each's spreading
# threshold, SPREAD_MIN_WORK): NumPy's float32 exp/tanh/erf run at 2-4 ns per element on one core
# (this machine, in cache: exp 2.3 ns; swish's three other passes 0.5 ns), a GEMM multiply-add at
# about 0.035 ns. Counted as nothing, EfficientNetB0's 1x1 expansions (19 M multiply-adds, 1.2 M
# swish elements at batch 1) ran their swish epilogues on one core.
TRANSCENDENTAL_WORK = 80
TRANSCENDENTAL = frozenset({"swish", "silu", "sigmoid", "tanh", "gelu", "elu", "selu", "softplus", "mish"})


def element_work(epilogue: Callable[..., None]) -> float:
    """The work per output element :func:`in_place_epilogue` / :func:`copying_epilogue` put on
    ``epilogue`` (0 for any other callable): what a kernel adds to its own when deciding whether
    to spread its blocks over threads."""
    return float(getattr(epilogue, "element_work", 0.0))


def _element_work(name: str | None) -> float:
    return TRANSCENDENTAL_WORK if name in TRANSCENDENTAL else 0.0


def _activate(name: str, act: Activation, src: np.ndarray, dst: np.ndarray) -> None:
    """``dst = act(src)`` (``dst`` may be ``src``; ``src`` may be overwritten): relu / relu6 as one
    ``clip`` without temporaries; float32 sigmoid and swish / silu with the compiled loop when the
    ``jit`` extra is there (:mod:`modelgraph.runner.fast.sigmoid`), else swish chunk by chunk without
    a tensor-sized temporary."""
    if name == "relu":
        rowwise.relu_(src, out=dst)
    elif name == "relu6":
        rowwise.relu6_(src, out=dst)
    elif name in sigmoid.NAMES and sigmoid.apply(name, src, dst):
        return
    elif name in sigmoid.NAMES and sigmoid.apply(name, src, src):
        dst[...] = src  # a strided destination (a padded slab's interior): computed in place, moved
    elif name in ("swish", "silu") and src.dtype == np.float32 and dst.dtype == np.float32:
        rowwise.silu_(src, out=dst)
    else:
        dst[...] = act(src)


def in_place_epilogue(
    bias: np.ndarray | None, act_value: Any, act: Activation | None, residual: np.ndarray | None = None
) -> Epilogue:
    """``epilogue(block, region)``: bias add, then ``residual[region]`` added (a residual sum merged
    into the conv that feeds it; ``residual`` has the output's shape and ``block`` holds the same
    elements in the same order, e.g. flattened to GEMM rows), then the activation, all in place on
    the output block (relu / relu6 without temporaries)."""
    name = activation_name(act_value)
    bias_run = None if bias is None else rowwise.repeat_row(bias)
    # With a bias and no activation, relu or relu6: one compiled pass for the bias, residual and
    # clamp (bias_act.py, float32 blocks); other activations, or no bias, keep the NumPy passes.
    clamp = bias_act.bounds(name if act is not None else None)
    row = None if bias_run is None or clamp is None else bias_run.row

    def epilogue(block: np.ndarray, region: Region | None) -> None:
        if row is not None and clamp is not None:
            part = None
            if residual is not None:
                if region is None:
                    raise ValueError("a residual epilogue needs the block's region")
                part = residual[region]
            if bias_act.apply(block, row, part, clamp):
                return
        if bias_run is not None:
            rowwise.apply(np.add, block, bias_run)
        if residual is not None:
            if region is None:
                raise ValueError("a residual epilogue needs the block's region")
            np.add(block, residual[region].reshape(block.shape), out=block)
        if act is not None:
            _activate(name, act, block, block)

    epilogue.element_work = _element_work(name if act is not None else None)  # type: ignore[attr-defined]
    return epilogue


def copying_epilogue(bias: np.ndarray | None, act_value: Any, act: Activation | None) -> CopyingEpilogue:
    """``epilogue(src, dst)``: ``dst = act(src + bias)``, where ``dst`` (``src``'s shape) may be a
    strided view, e.g. a padded slab's interior, and ``src`` is C-ordered scratch (overwritten). The
    bias is added in place in ``src`` (contiguous, the fast loop) and the activation (relu / relu6:
    one ``clip``; else a copy) writes its result to ``dst``, so the move costs no pass of its own."""
    name = activation_name(act_value)
    bias_run = None if bias is None else rowwise.repeat_row(bias)

    def epilogue(src: np.ndarray, dst: np.ndarray) -> None:
        if bias_run is not None:
            rowwise.apply(np.add, src, bias_run)
        if act is None:
            dst[...] = src
        else:
            _activate(name, act, src, dst)

    epilogue.element_work = _element_work(name if act is not None else None)  # type: ignore[attr-defined]
    return epilogue


def with_residual(
    compute: Callable[[Epilogue], np.ndarray],
    bias: np.ndarray | None,
    act_value: Any,
    act: Activation | None,
    residual: Any,
    out_shape: Sequence[int] | None,
    dtype: np.dtype,
) -> np.ndarray:
    """``act(compute(...) + residual)`` for a kernel ``compute(epilogue)`` whose last stage adds
    ``bias`` and is otherwise linear: a merged residual sum. When the residual has the output's shape
    (``out_shape``; None: unknown) and dtype, the sum and activation run in the epilogue, block by
    block; otherwise it is added afterwards, broadcasting as Keras's Add would."""
    shortcut = np.asarray(residual)
    if out_shape is not None and shortcut.dtype == dtype and shortcut.shape == tuple(out_shape):
        return compute(in_place_epilogue(bias, act_value, act, residual=np.ascontiguousarray(shortcut)))
    total = compute(in_place_epilogue(bias, "linear", None)) + shortcut
    return total if act is None else act(total)


def layout_activation(spec: KernelSpec, fmt: str) -> tuple[Any, Activation | None, Activation | None]:
    """``(value, act, after)``: the activation a conv kernel fuses into its channels-last compute
    (its config value and function, None for linear) and the one it applies to its output after moving
    it back to ``fmt`` (None: nothing left). Keras applies a conv's activation to the output as laid out,
    so a ``channels_first`` conv's ``softmax`` normalises the last, spatial axis: an activation of
    ``AXIS_ACTIVATIONS`` in ``channels_first`` runs after the move; element-wise ones fuse."""
    value = spec.get("activation")
    act = fused_activation(spec)
    if fmt == "channels_first" and activation_name(value) in AXIS_ACTIVATIONS:
        return "linear", None, act
    return value, act, None


def then_activate(run: Callable[..., np.ndarray], after: Activation | None) -> Callable[..., np.ndarray]:
    """``run`` followed by ``after`` (``run`` itself when ``after`` is None)."""
    if after is None:
        return run

    def activated(*args: Any) -> np.ndarray:
        return after(run(*args))

    return activated
