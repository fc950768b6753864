"""Dtype policies: what a layer's ``dtype`` config means for the runner.

A layer config's ``dtype`` may be a plain string (``"float32"``, ``"mixed_float16"``), a Keras 3
``DTypePolicy`` dict, a tf.keras mixed-precision ``Policy`` dict, or a quantized policy
(``QuantizedDTypePolicy`` & co., see docs/formats.md, "Quantized dtype policies").

Mixed precision (``mixed_float16``/``mixed_bfloat16``) keeps float32 variables and computes in the
half type; ``float16``/``bfloat16`` policies do both in the half type. The runner emulates it around
the kernel: floating inputs are cast to the compute dtype, the kernel is built with
``compute_dtype`` and with its weights rounded to the compute precision (normalization layers keep
float32 statistics, as Keras does), and floating outputs are rounded again.

NumPy has no bfloat16: a bfloat16 tensor is a float32 array whose values are rounded to bfloat16
precision (round-to-nearest-even on the upper 16 bits of the float32 bit pattern).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from modelgraph.errors import UnsupportedConfigError
from modelgraph.weight_names import mode_block_size

_HALF = {"float16", "bfloat16"}
_FLOATS = {"float16", "bfloat16", "float32", "float64"}
_QUANTIZED_CLASSES = (
    "QuantizedDTypePolicy",
    "QuantizedFloat8DTypePolicy",
    "Int4DTypePolicy",
    "GPTQDTypePolicy",
    "AWQDTypePolicy",
    "TernaryDTypePolicy",
    "DTypePolicyMap",
)
_QUANTIZED_PREFIXES = ("int8", "int4", "float8", "gptq", "awq", "ternary")


@dataclass(frozen=True, slots=True)
class Policy:
    """A resolved dtype policy: the name Keras gave it, the compute and variable dtypes."""

    name: str
    compute_dtype: str
    variable_dtype: str
    quantization: str | None = None

    @property
    def is_half(self) -> bool:
        return self.compute_dtype in _HALF

    @property
    def is_default(self) -> bool:
        return self.compute_dtype == "float32" and self.quantization is None


FLOAT32 = Policy("float32", "float32", "float32")


def policy_name(value: Any) -> tuple[str | None, str | None]:
    """``(name, quantization class)`` of a config ``dtype`` value (string or policy dict)."""
    if value is None:
        return None, None
    if isinstance(value, str):
        return value, None
    if isinstance(value, Mapping):
        class_name = str(value.get("class_name") or "")
        inner = value.get("config")
        if class_name in _QUANTIZED_CLASSES or "Quantized" in class_name:
            return None, class_name
        if isinstance(inner, Mapping):
            name = inner.get("name")
            if name is None and "source_name" in inner:  # a quantized policy spelled another way
                return None, class_name or "quantized"
            return (str(name) if name is not None else None), None
    return None, None


def resolve_policy(value: Any, class_name: str = "Layer", layer: str | None = None) -> Policy:
    """The :class:`Policy` of one layer config's ``dtype`` value; unsupported ones raise.

    Keras 3 int8 and int4 policies resolve to float32 compute with ``quantization`` set (see
    :mod:`modelgraph.runner.quantized`); other quantized policies (float8, ...) raise
    :class:`UnsupportedConfigError`.
    """
    name, quantized = policy_name(value)
    if quantized is not None:
        inner = value.get("config") if isinstance(value, Mapping) else None
        mode = inner.get("mode") if isinstance(inner, Mapping) else None
        source = inner.get("source_name", "float32") if isinstance(inner, Mapping) else "float32"
        if source in (None, "float32") and (
            (quantized == "QuantizedDTypePolicy" and mode == "int8")
            or (quantized in ("Int4DTypePolicy", "QuantizedDTypePolicy") and _is_int4_mode(mode))
        ):
            return Policy(f"{mode}_from_float32", "float32", "float32", quantization=str(mode).split("/")[0])
        raise UnsupportedConfigError(class_name, "dtype", _describe(value), layer)
    if name is None:
        return FLOAT32
    if name.startswith(_QUANTIZED_PREFIXES):
        raise UnsupportedConfigError(class_name, "dtype", name, layer)
    if name.startswith("mixed_"):
        compute = name[len("mixed_") :]
        if compute not in _HALF:
            raise UnsupportedConfigError(class_name, "dtype", name, layer)
        return Policy(name, compute, "float32")
    if name in _FLOATS:
        return Policy(name, name, name)
    if name == "_infer":  # tf.keras 1.x-style "infer from inputs": float32 in practice
        return FLOAT32
    # An integer/bool dtype on a layer (e.g. a preprocessing layer) does not change float compute.
    try:
        np.dtype(name)
    except TypeError:
        raise UnsupportedConfigError(class_name, "dtype", name, layer) from None
    return Policy(name, name, name)


def _is_int4_mode(mode: Any) -> bool:
    """``"int4"`` or Keras 3.15's ``"int4/<block size>"`` (-1: per output channel)."""
    return isinstance(mode, str) and (mode == "int4" or mode_block_size(mode) is not None)


def _describe(value: Any) -> Any:
    if isinstance(value, Mapping):
        inner = value.get("config")
        return {
            "class_name": value.get("class_name"),
            "config": dict(inner) if isinstance(inner, Mapping) else inner,
        }
    return value


# --- numerics ------------------------------------------------------------------------------------


def round_bfloat16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 precision (round-to-nearest-even), still float32.

    NaN stays NaN and infinities stay infinite; values past bfloat16's range round to infinity, as a
    cast to bfloat16 does.
    """
    a = np.ascontiguousarray(x, dtype=np.float32)
    bits = a.view(np.uint32)
    lsb = (bits >> np.uint32(16)) & np.uint32(1)
    rounded = (bits + np.uint32(0x7FFF) + lsb) & np.uint32(0xFFFF0000)
    out = rounded.view(np.float32)
    nan = np.isnan(a)
    if nan.any():
        out = np.where(nan, a, out)
    return out


def to_compute(x: Any, dtype: str) -> Any:
    """Cast a floating array to a compute dtype (bfloat16: rounded float32); others unchanged."""
    if not isinstance(x, np.ndarray) or x.dtype.kind != "f":
        return x
    if dtype == "bfloat16":
        return round_bfloat16(x)
    if x.dtype == dtype:
        return x
    return x.astype(dtype)


def weight_to_compute(value: np.ndarray, dtype: str) -> np.ndarray:
    """A floating weight as Keras's autocast gives it to ``call``: float16 arrays for float16,
    float32 arrays rounded to bfloat16 precision for bfloat16 (NumPy's float16 matmul accumulates in
    float32 and rounds once, like TensorFlow's CPU kernel; the bias add then rounds again)."""
    value = np.asarray(value)
    if value.dtype.kind != "f":
        return value
    if dtype == "bfloat16":
        return round_bfloat16(value)
    return value.astype(dtype)


def input_dtype(config: Mapping[str, Any]) -> str:
    """The dtype an InputLayer declares (``dtype`` in Keras 2/3, ``input_dtype`` in Keras 1)."""
    value = config.get("dtype", config.get("input_dtype"))
    name, _ = policy_name(value)
    if name is None:
        return "float32"
    if name.startswith("mixed_"):
        return "float32"
    return name


def cast_input(x: np.ndarray, dtype: str) -> np.ndarray:
    """An input array cast to its InputLayer dtype (bfloat16: rounded float32)."""
    if dtype == "bfloat16":
        return round_bfloat16(np.asarray(x, dtype=np.float32))
    target = np.dtype(dtype)
    if x.dtype == target:
        return x
    return x.astype(target)
