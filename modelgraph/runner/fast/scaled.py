"""A 1x1 Conv2D of a product ``a * s`` where ``s`` holds one value per image and channel: the merged
squeeze-and-excitation step (``passes/squeeze_excite.py``).

``conv(a * s)[b] = a[b] @ (s[b] * K) + bias``: the scale goes into a per-image copy of the ``(C, F)``
kernel (``C * F`` products per image, against ``H * W * C`` for scaling the tensor), and one batched
GEMM reads ``a`` directly, so the product tensor (as large as ``a``) is neither written nor read back.
Images with fewer pixels than filters are scaled instead (the cheaper of the two).
Products are rounded in another order than Keras's (``a * (s * K)`` against ``(a * s) * K``), within
float32 rounding. Inputs of any other shapes are multiplied first, broadcasting as ``Multiply``
does, and convolved by the layer's own fast kernel.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from modelgraph.runner.fast.conv import conv2d
from modelgraph.runner.fast.epilogue import in_place_epilogue, layout_activation
from modelgraph.runner.kernels.conv import conv_params
from modelgraph.runner.kernels.merge import same_rank
from modelgraph.runner.registry import Kernel, KernelSpec


def _per_channel_scale(s: np.ndarray, x: np.ndarray) -> bool:
    """Whether ``s`` is one value per image and channel of the rank-4 ``x``: ``(B, 1, 1, C)``."""
    return (
        x.ndim == 4
        and s.shape == (x.shape[0], 1, 1, x.shape[3])
        and x.dtype == s.dtype == np.float32
        and x.flags.c_contiguous
    )


def scaled_pointwise_conv2d(spec: KernelSpec) -> Kernel:
    """``run(a, b) = conv2d(a * b)`` for a channels-last 1x1 stride-1 Conv2D (groups 1) ``spec``."""
    p = conv_params(spec, 2)
    if (
        p.fmt != "channels_last"
        or p.kernel_size != (1, 1)
        or p.strides != (1, 1)
        or p.dilation != (1, 1)
        or p.groups != 1
        or np.dtype(p.dtype) != np.float32
    ):
        raise spec.unsupported("kernel_size", list(p.kernel_size))
    kernel = np.ascontiguousarray(p.kernel.reshape(p.cin_g, p.filters))
    act_value, act, _ = layout_activation(spec, p.fmt)
    epilogue = in_place_epilogue(p.bias, act_value, act)
    plain = conv2d(spec)

    def run(a: Any, b: Any) -> np.ndarray:
        x, s = np.asarray(a), np.asarray(b)
        if not _per_channel_scale(s, x):
            x, s = s, x
        if not _per_channel_scale(s, x) or x.shape[3] != kernel.shape[0]:
            first, second = same_rank([np.asarray(a), np.asarray(b)])
            return plain(first * second)
        batch, height, width, _ = x.shape
        if height * width < kernel.shape[1]:
            # Fewer pixels than filters (EfficientNet's last blocks: 7x7 against 320): scaling the
            # image costs less than scaling the kernel.
            return plain(x * s)
        scaled = s.reshape(batch, -1, 1) * kernel  # (B, C, F)
        out = np.empty((batch, height, width, kernel.shape[1]), dtype=np.float32)
        np.matmul(x.reshape(batch, height * width, -1), scaled, out=out.reshape(batch, height * width, -1))
        epilogue(out.reshape(-1, kernel.shape[1]), None)
        return out

    return run
