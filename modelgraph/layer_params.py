"""Layer and op config parsing that the reference kernels and the ONNX lowerings share.

Every function reads a config value the way Keras does and refuses, with
:class:`~modelgraph.errors.UnsupportedConfigError` naming the layer and key, what Keras would not accept or
modelgraph does not implement: the lowering of a layer must read its config exactly as its kernel does,
so both import these instead of each keeping a copy (or one importing the other's private helpers).
``spec`` is the :class:`~modelgraph.runner.registry.KernelSpec` both are built from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from modelgraph.errors import UnsupportedConfigError

if TYPE_CHECKING:
    from modelgraph.runner.registry import KernelSpec


NO_DEFAULT = object()


def axis_value(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(value)
    return value


def config_params(
    spec: KernelSpec,
    source: Mapping[str, Any],
    known: Mapping[str, Any],
    where: str,
    ignore: Sequence[str] = ("name",),
) -> dict[str, Any]:
    """The known parameters from ``source`` with defaults; unknown keys with a real value are refused."""
    out: dict[str, Any] = {}
    for key, value in source.items():
        if key in ignore:
            continue
        if key in known:
            out[key] = value
        elif value is not None and value is not False:
            raise UnsupportedConfigError(spec.class_name, f"{where}{key}", value, spec.name)
    for key, default in known.items():
        if key not in out:
            if default is NO_DEFAULT:
                raise UnsupportedConfigError(spec.class_name, f"{where}{key}", "<missing>", spec.name)
            out[key] = default
    return out


def dtype_value(spec: KernelSpec, key: str, value: Any) -> np.dtype:
    name = value.get("config", {}).get("name") if isinstance(value, Mapping) else value
    if not isinstance(name, str) or name in ("bfloat16", "string") or name.startswith("float8"):
        raise UnsupportedConfigError(spec.class_name, key, value, spec.name)
    try:
        return np.dtype(name)
    except TypeError:
        raise UnsupportedConfigError(spec.class_name, key, value, spec.name) from None


def _decode_index(item: Any) -> Any:
    """One element of a getitem key, in any of the recorded forms, as a NumPy index."""
    if isinstance(item, Mapping):
        cls = item.get("class_name")
        if cls == "__ellipsis__":
            return Ellipsis
        cfg = item.get("config", item) if cls == "__slice__" else item
        if set(cfg) <= {"start", "stop", "step"}:
            return slice(
                _int_or_none(cfg.get("start")), _int_or_none(cfg.get("stop")), _int_or_none(cfg.get("step"))
            )
        raise ValueError(f"unknown index element {item!r}")
    if isinstance(item, np.ndarray) and item.ndim == 0:
        return int(item)
    return item


def _int_or_none(v: Any) -> int | None:
    if v is None:
        return None
    return int(v)


def decode_key(key: Any) -> Any:
    if isinstance(key, list | tuple):
        return tuple(_decode_index(k) for k in key)
    return _decode_index(key)


# Config keys that never change what a layer computes at inference time.
INERT_KEYS = frozenset(
    {
        "name",
        "trainable",
        "dtype",
        "batch_input_shape",
        "batch_shape",
        "input_shape",
        "input_dtype",
        "kernel_initializer",
        "bias_initializer",
        "depthwise_initializer",
        "pointwise_initializer",
        "kernel_regularizer",
        "bias_regularizer",
        "depthwise_regularizer",
        "pointwise_regularizer",
        "activity_regularizer",
        "kernel_constraint",
        "bias_constraint",
        "depthwise_constraint",
        "pointwise_constraint",
        # Keras 3 saves the LoRA-merged kernel (``save_own_variables`` stores ``self.kernel``).
        "lora_rank",
        "lora_alpha",
    }
)


def check_keys(spec: KernelSpec, used: Iterable[str]) -> None:
    """Refuse any config key this kernel neither implements nor knows to be inert."""
    known = INERT_KEYS.union(used)
    for key, value in spec.config.items():
        if key not in known:
            raise spec.unsupported(key, value)


def int_tuple(spec: KernelSpec, key: str, n: int, default: Any) -> tuple[int, ...]:
    """An int or a list of ``n`` ints (Keras ``standardize_tuple``)."""
    value = spec.get(key, default)
    if value is None:
        value = default
    if isinstance(value, bool):
        raise spec.unsupported(key, value)
    if isinstance(value, (int, np.integer)):
        return (int(value),) * n
    if (
        isinstance(value, (list, tuple))
        and len(value) == n
        and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value)
    ):
        return tuple(int(v) for v in value)
    raise spec.unsupported(key, value)


def pair_tuple(spec: KernelSpec, key: str, n: int, default: Any) -> list[tuple[int, int]]:
    """ZeroPadding/Cropping amounts: an int, ``n`` ints (symmetric), or ``n`` pairs."""
    value = spec.get(key, default)

    def is_int(v: Any) -> bool:
        return isinstance(v, (int, np.integer)) and not isinstance(v, bool)

    if is_int(value):
        return [(int(value), int(value))] * n
    if isinstance(value, (list, tuple)):
        if n == 1 and len(value) == 2 and all(is_int(v) for v in value):
            return [(int(value[0]), int(value[1]))]
        if len(value) == n and all(is_int(v) for v in value):
            return [(int(v), int(v)) for v in value]
        if len(value) == n and all(
            isinstance(p, (list, tuple)) and len(p) == 2 and all(is_int(v) for v in p) for p in value
        ):
            return [(int(p[0]), int(p[1])) for p in value]
    raise spec.unsupported(key, value)


def data_format(spec: KernelSpec) -> str:
    value = spec.get("data_format")
    if value is None:
        return "channels_last"
    if value in ("channels_last", "channels_first"):
        return value
    raise spec.unsupported("data_format", value)


def padding_mode(spec: KernelSpec, allowed: Sequence[str], default: str = "valid") -> str:
    value = spec.get("padding", default)
    mode = value.lower() if isinstance(value, str) else value
    if mode not in allowed:
        raise spec.unsupported("padding", value)
    return mode


def depthwise_weight_name(names: Iterable[str]) -> str:
    """The name a depthwise conv's kernel has among ``names``: ``kernel`` (Keras 3, and the canonical
    name the loader gives Keras 2's), else ``depthwise_kernel``."""
    return "kernel" if "kernel" in set(names) else "depthwise_kernel"


def config_numbers(spec: KernelSpec, key: str, default: Any) -> np.ndarray | None:
    """A scalar or (nested) list config value as a float64 array; ``__numpy__`` records unwrapped."""
    value = spec.get(key, default)
    if value is None:
        return None
    if isinstance(value, Mapping) and value.get("class_name") == "__numpy__":
        inner = value.get("config")
        value = inner.get("value") if isinstance(inner, Mapping) else None
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise UnsupportedConfigError(spec.class_name, key, spec.get(key), spec.name) from None
    if arr.dtype == object or isinstance(value, bool):
        raise UnsupportedConfigError(spec.class_name, key, spec.get(key), spec.name)
    return arr


def inner_record(spec: KernelSpec, key: str) -> tuple[str, dict[str, Any]] | None:
    """The ``(class_name, config)`` of a wrapper's nested layer record ``key`` (None when absent)."""
    record = spec.get(key)
    if record is None:
        return None
    if not isinstance(record, Mapping) or not isinstance(record.get("class_name"), str):
        raise spec.unsupported(key, record)
    config = record.get("config")
    if not isinstance(config, Mapping):
        raise spec.unsupported(key, record)
    return record["class_name"], dict(config)


def cell_records(spec: KernelSpec) -> list[tuple[str, dict[str, Any], str]]:
    """(cell class, config, weight prefix) of each cell of an ``RNN(cell)`` layer, in stacking order."""
    cell = inner_record(spec, "cell")
    if cell is None:
        raise spec.unsupported("cell", None)
    if cell[0] != "StackedRNNCells":
        return [(cell[0], cell[1], "")]
    cells = cell[1].get("cells")
    if not isinstance(cells, list) or not cells:
        raise spec.unsupported("cell", cell[0])
    out = []
    for i, record in enumerate(cells):
        if not isinstance(record, Mapping) or not isinstance(record.get("config"), Mapping):
            raise spec.unsupported("cell", record)
        out.append((str(record.get("class_name")), dict(record["config"]), f"cells/{i}/"))
    return out


def bind_call(
    name: str, order: Sequence[str], args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """Python-style binding of a recorded call to the parameter names of a Keras ``call``."""
    if len(args) > len(order):
        raise TypeError(f"{name}: too many positional arguments ({len(args)})")
    bound = dict(zip(order, args, strict=False))
    for key, value in kwargs.items():
        if key not in order:
            raise TypeError(f"{name}: unexpected call argument {key!r}")
        if key in bound:
            raise TypeError(f"{name}: argument {key!r} given twice")
        bound[key] = value
    return bound


def positive_int(spec: KernelSpec, key: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise spec.unsupported(key, value)
    return value


def plain_ints(value: object) -> tuple[int, ...] | None:
    """An int or a list of ints as a tuple, None for anything else (no error: for code deciding
    whether it can handle a config, not refusing it)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    if isinstance(value, list | tuple) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return tuple(value)
    return None


def zero_pads_2d(value: object) -> list[list[int]] | None:
    """A 2-D zero padding (ZeroPadding2D's ``padding``: ``n``, ``(h, w)`` or ``((top, bottom), (left,
    right))``) as ``[[top, bottom], [left, right]]``; None when malformed or negative."""
    flat = plain_ints(value)
    if flat is not None and len(flat) == 1 and flat[0] >= 0:
        return [[flat[0]] * 2, [flat[0]] * 2]
    if flat is not None and len(flat) == 2 and min(flat) >= 0:
        return [[flat[0]] * 2, [flat[1]] * 2]
    if isinstance(value, list | tuple) and len(value) == 2:
        pairs = [plain_ints(v) for v in value]
        if all(p is not None and len(p) == 2 and min(p) >= 0 for p in pairs):
            return [list(p) for p in pairs]  # type: ignore[arg-type]
    return None
