"""What ``convert`` does to a class's config beyond its :class:`~modelgraph.catalogue.spec.ConfigSpec`
upgrade: the ``upgrade`` hooks of the entries' :class:`~modelgraph.catalogue.spec.Keras3Rules`.

The catalogue's config upgrade (shared with ``diff``) reads an older config as Keras 3 would; the hooks
here hold only what a writer needs beyond that: refusing what Keras 3 cannot express
(:class:`NotConvertible`), and the writer-only rewrites (InputLayer's record, wrapped layers and RNN
cells, SeparableConv's base-class leftovers, Embedding ``input_length``). Each hook is
``hook(config, ctx) -> config``; ``ctx`` is the writer's upgrade context (``ctx.major``, ``ctx.layer``,
``ctx.cell``, see :class:`modelgraph.saving.upgrades.UpgradeContext`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class NotConvertible(Exception):
    """This config cannot be written faithfully for Keras 3; the message says why."""


def drop_if(out: dict[str, Any], key: str, allowed: tuple[Any, ...]) -> None:
    """Drop a key Keras 3 does not accept when its value is one that changes nothing."""
    if key not in out:
        return
    if out[key] not in allowed:
        raise NotConvertible(f"{key}={out[key]!r} has no Keras 3 equivalent")
    del out[key]


def input_layer(out: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """InputLayer: Keras 3's record (``batch_shape``, a plain dtype string); sparse/ragged refused."""
    if "batch_input_shape" in out:
        out["batch_shape"] = out.pop("batch_input_shape")
    if "input_dtype" in out:  # Keras 1
        out["dtype"] = out.pop("input_dtype")
    dtype = out.get("dtype")
    if isinstance(dtype, Mapping):  # InputLayer keeps a plain dtype string
        inner = dtype.get("config") or {}
        out["dtype"] = inner.get("name", "float32")
    result = {
        "batch_shape": out.get("batch_shape"),
        "dtype": out.get("dtype") or "float32",
        "sparse": bool(out.get("sparse", False)),
        "ragged": bool(out.get("ragged", False)),
        "name": out.get("name"),
        "optional": bool(out.get("optional", False)),
    }
    if result["sparse"] or result["ragged"]:
        raise NotConvertible("sparse or ragged inputs are not written")
    return result


def refuse_time_major(out: dict[str, Any]) -> None:
    """Drop ``time_major: false``; refuse ``time_major: true`` (the writer strips it where it can
    write Transpose op nodes around the layer instead)."""
    if out.get("time_major"):
        raise NotConvertible(
            "time_major=True has no Keras 3 equivalent here (a .keras file writes a time-major "
            "layer of the model itself with Transpose op nodes around it)"
        )
    out.pop("time_major", None)


def rnn(out: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """SimpleRNN, LSTM, GRU: the catalogue dropped ``time_major: false`` and set GRU ``reset_after``
    by version; a time-major layer reaches here only where no Transpose op nodes can be written
    around it (inside a wrapper, in a legacy .h5)."""
    refuse_time_major(out)
    return out


def generic_rnn(out: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """RNN(cell): as :func:`rnn`, and a Keras 2 cell record in Keras 3's form."""
    refuse_time_major(out)
    if ctx.major < 3 and isinstance(out.get("cell"), Mapping):
        out["cell"] = ctx.cell(out["cell"])
    return out


def no_groups(out: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """tf.keras's base convolution gave depthwise and transposed convolutions a ``groups`` argument
    (always 1 for them); Keras 3's constructors refuse the key."""
    drop_if(out, "groups", (1, None))
    return out


def batch_norm(out: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """BatchNormalization: the catalogue made ``axis`` an int and dropped ``renorm_*`` when renorm is
    off; tf.keras-only keys that change nothing go, any other value is refused."""
    for key, neutral in (
        ("fused", (None, True, False)),
        ("renorm", (False,)),
        ("renorm_clipping", (None,)),
        ("renorm_momentum", (0.99, None)),
        ("virtual_batch_size", (None,)),
        ("adjustment", (None,)),
    ):
        drop_if(out, key, neutral)
    return out


def separable(out: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """SeparableConv: no ``groups``, and tf.keras's base-class ``kernel_*`` leftovers dropped (a
    separable conv has no ``kernel``)."""
    drop_if(out, "groups", (1, None))
    for key in ("kernel_initializer", "kernel_regularizer", "kernel_constraint"):
        out.pop(key, None)
    return out


def wrapper(out: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Bidirectional, TimeDistributed: the wrapped layer records upgraded like any layer."""
    for key in ("layer", "backward_layer"):
        record = out.get(key)
        if isinstance(record, Mapping) and isinstance(record.get("class_name"), str):
            name, inner = ctx.layer(record["class_name"], record.get("config") or {})
            out[key] = {
                "module": "keras.layers",
                "class_name": name,
                "config": inner,
                "registered_name": None,
            }
    return out


def spatial_dropout(out: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Keras 3's SpatialDropout takes only rate, seed, name, dtype (and data_format for 2D/3D); a
    weightless layer's ``trainable`` changes nothing."""
    out.pop("trainable", None)
    drop_if(out, "noise_shape", (None,))
    return out


def multi_head_attention(out: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """The catalogue dropped tf.keras's build shapes (``query_shape``, ...)."""
    drop_if(out, "softmax_robust_masking", (False, None))
    return out


def embedding(out: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """``input_length`` is a build-time shape check only; Keras 3 infers it."""
    out.pop("input_length", None)
    return out


def thresholded_relu(config: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """tf.keras ThresholdedReLU(theta): ``x * (x > theta)``, which Keras 3's ReLU(threshold=theta)
    computes as ``where(x > theta, x, 0)``."""
    out = {k: v for k, v in config.items() if k != "theta"}
    return {**out, "negative_slope": 0.0, "max_value": None, "threshold": float(config.get("theta", 1.0))}


# --- Keras 3 ops as tf_keras Rescaling layers: x * scale + offset, bit for bit --------------------


def scale_by(number: float, tensor_first: bool) -> tuple[float, float]:
    """``x * c`` (either order)."""
    return number, 0.0


def shift_by(number: float, tensor_first: bool) -> tuple[float, float]:
    """``x + c`` (either order)."""
    return 1.0, number


def subtract(number: float, tensor_first: bool) -> tuple[float, float]:
    """``x - c = x + (-c)``; ``c - x = -x + c``."""
    return (1.0, -number) if tensor_first else (-1.0, number)
