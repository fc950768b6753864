"""Fast kernels: speed paths chosen at plan time in place of a reference kernel.

A reference kernel (``modelgraph/runner/kernels/``, registered under the Keras class names) states
Keras's semantics in plain NumPy. A fast kernel computes the same thing faster (im2col/GEMM blocking,
Winograd, row-wise threading, epilogues fused in cache, separable blocked pooling) and is listed
here, keyed by the reference factory it replaces, so the aliases a reference kernel is registered
under need no second list. A fast factory returns None when it does not apply to a layer (the
reference kernel then runs); at run time it handles every layout it is given, copying when it needs
contiguous rows. The machinery they share: ``blocks.py`` (block sizes, scratch, row blocks, slabs,
tap loops), ``gemm.py``, ``depthwise.py``, ``winograd.py`` and ``epilogue.py``.

The plan's merged steps (``fused.py``: inverted bottlenecks, residual sums, padded reads) are made
by the fusion passes (``modelgraph/runner/passes/``) and only exist in a fused plan.

``Runner(graph, reference=True)`` (``modelgraph run --reference``) runs the reference kernels only,
on the unfused graph; ``tests/runner/test_fast_vs_reference.py`` checks every fast kernel against
its reference.
"""

from __future__ import annotations

from collections.abc import Callable

from modelgraph.runner.fast import conv as fast_conv
from modelgraph.runner.fast import fused  # noqa: F401  (registers the merged steps fusion produces)
from modelgraph.runner.fast import pooling as fast_pooling
from modelgraph.runner.kernels import conv as reference_conv
from modelgraph.runner.kernels import pooling as reference_pooling
from modelgraph.runner.registry import Kernel, KernelFactory, KernelSpec, get_kernel

FastFactory = Callable[[KernelSpec], Kernel | None]

FAST_KERNELS: dict[KernelFactory, FastFactory] = {
    reference_conv.conv1d: fast_conv.conv1d,
    reference_conv.conv2d: fast_conv.conv2d,
    reference_conv.conv3d: fast_conv.conv3d,
    reference_conv.depthwise_conv1d: fast_conv.depthwise_conv1d,
    reference_conv.depthwise_conv2d: fast_conv.depthwise_conv2d,
    reference_conv.separable_conv1d: fast_conv.separable_conv1d,
    reference_conv.separable_conv2d: fast_conv.separable_conv2d,
    **{reference_pooling.POOLING[key]: fast_pooling.POOLING[key] for key in reference_pooling.POOLING},
    **{
        reference_pooling.GLOBAL_POOLING["avg", rank]: fast_pooling.GLOBAL_AVG[rank]
        for rank in fast_pooling.GLOBAL_AVG
    },
}


def build(factory: KernelFactory, spec: KernelSpec) -> Kernel:
    """The kernel for ``spec``: the fast kernel replacing ``factory`` when there is one that applies,
    else ``factory``'s (the reference kernel)."""
    fast = FAST_KERNELS.get(factory)
    if fast is not None:
        kernel = fast(spec)
        if kernel is not None:
            return kernel
    return factory(spec)


def kernel_for(key: str, spec: KernelSpec, *, reference: bool = False) -> Kernel:
    """The kernel the runner's plan uses for registry key ``key`` (the reference kernel with
    ``reference``)."""
    factory = get_kernel(key, spec.name)
    return factory(spec) if reference else build(factory, spec)
