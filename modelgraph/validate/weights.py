"""Weight rules (``WGT``): stored weights against the layer configs; values with ``check_values``.

Names and shapes are compared with what Keras would create (:func:`modelgraph.shapes.expected_weights`,
computed by shape inference for the shapes each layer is actually called on, else from the layer's
``build_config``). Values are read only with ``check_values``, in slabs of at most
:data:`CHUNK_BYTES`, so memory stays bounded whatever the size of a weight.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from modelgraph.errors import ModelGraphError
from modelgraph.graph import Layer, ModelGraph, Weight
from modelgraph.runner.dtypes import policy_name
from modelgraph.validate.issue import Issue
from modelgraph.validate.registry import make_issue
from modelgraph.weight_names import quantization_mode

CHUNK_BYTES = 16 * 1024 * 1024
"""Largest slab read at once when checking values."""
WHOLE_READ_LIMIT = 256 * 1024 * 1024
"""A weight whose storage cannot be sliced (TF.js shards) is read whole only up to this size."""

_FLOAT_NAMES = frozenset(
    {
        "kernel", "bias", "gamma", "beta", "moving_mean", "moving_variance", "embeddings",
        "depthwise_kernel", "pointwise_kernel", "recurrent_kernel", "alpha", "scale",
    }
)  # fmt: skip
_KERNEL_NAMES = frozenset(
    {"kernel", "depthwise_kernel", "pointwise_kernel", "recurrent_kernel", "embeddings"}
)


def _policy_name(dtype: Any) -> str | None:
    """The policy name of a layer's ``dtype`` config value (a string, or a policy's ``name``)."""
    if isinstance(dtype, str):
        return dtype
    if isinstance(dtype, Mapping):
        cfg = dtype.get("config")
        name = cfg.get("name") if isinstance(cfg, Mapping) else None
        return name if isinstance(name, str) else None
    return None


def variable_dtype(layer: Layer) -> str | None:
    """The dtype Keras gives this layer's variables, or None when unknown or quantized."""
    dtype = layer.config.get("dtype")
    if quantization_mode(layer.config) or policy_name(dtype)[1] is not None:  # a quantized policy class
        return None
    name = _policy_name(dtype)
    if name and any(q in name for q in ("int8", "int4", "float8", "_from_")):
        return None
    if name is None:
        return "float32"
    if name.startswith("mixed_"):
        return "float32"
    if name in ("float16", "float32", "float64", "bfloat16"):
        return name
    return None


def _base(name: str) -> str:
    return name.rsplit("/", 1)[-1].split(":", 1)[0]


def _fmt(shape: Any) -> str:
    if shape is None:
        return "?"
    inner = ", ".join("None" if d is None else str(d) for d in shape)
    return f"({inner}{',' if len(shape) == 1 else ''})"


def _same(have: tuple[int, ...], want: tuple[Any, ...]) -> bool:
    return len(have) == len(want) and all(
        w is None or int(h) == int(w) for h, w in zip(have, want, strict=True)
    )


def _walk(graph: ModelGraph) -> Iterator[tuple[tuple[str, ...], Layer]]:
    stack: list[tuple[tuple[str, ...], ModelGraph]] = [((), graph)]
    while stack:
        prefix, g = stack.pop()
        for layer in g.layers:
            yield (*prefix, layer.name), layer
            if layer.subgraph is not None:
                stack.append(((*prefix, layer.name), layer.subgraph))


def _expected_at(result: Any, path: tuple[str, ...]) -> tuple[bool, dict[str, Any] | None]:
    """(found, expected weights) for a layer path in a shape result (first call of nested models)."""
    r = result
    for name in path[:-1]:
        if r is None:
            return False, None
        keys = sorted(k for k in r.nested if k[0] == name)
        r = r.nested.get(keys[0]) if keys else None
    if r is None or path[-1] not in r.expected:
        return False, None
    return True, r.expected[path[-1]]


def _where(path: tuple[str, ...], layer: Layer, weight: Weight | None = None) -> str:
    label = "/".join(path)
    out = f"layer '{label}'"
    if weight is not None:
        out += f" weight '{weight.name}'"
    if layer.json_path and len(path) == 1:
        out += f" ({layer.json_path})"
    return out


def weight_issues(
    graph: ModelGraph,
    shape_result: Any = None,
    *,
    path: str = "",
    skip_shapes: set[tuple[tuple[str, ...], str]] | None = None,
    check_values: bool = False,
) -> list[Issue]:
    """Every WGT finding of a loaded graph."""
    from modelgraph.shapes import expected_weights

    issues: list[Issue] = []
    skip_shapes = skip_shapes or set()
    meta = graph.metadata
    for note in meta.get("weight_notes") or ():
        if isinstance(note, str) and "matches no layer" in note:
            issues.append(make_issue("WGT002", note, "", path=path))
    unavailable = meta.get("weights_unavailable")
    if not graph.has_weights:
        wanted = []
        for lpath, layer in _walk(graph):
            if layer.subgraph is not None or layer.kind in ("input", "op"):
                continue
            found, exp = _expected_at(shape_result, lpath) if shape_result is not None else (False, None)
            if not found or exp is None:
                exp = expected_weights(layer)
            if exp:
                wanted.append("/".join(lpath))
        if wanted and not unavailable and graph.format in ("keras_zip", "keras_dir"):
            issues.append(
                make_issue(
                    "WGT010",
                    f"the .keras {'archive' if graph.format == 'keras_zip' else 'folder'} has no "
                    f"model.weights.h5 while {len(wanted)} layer(s) have weights (e.g. '{wanted[0]}'); "
                    "Keras cannot load it",
                    "",
                    path=path,
                )
            )
        elif wanted or unavailable:
            issues.append(
                make_issue(
                    "WGT008",
                    (str(unavailable) if unavailable else "the file stores no weights")
                    + (f"; {len(wanted)} layer(s) would have weights (e.g. '{wanted[0]}')" if wanted else ""),
                    "",
                    path=path,
                )
            )
        return issues
    keras1 = graph.keras_major == 1
    for lpath, layer in _walk(graph):
        if layer.subgraph is not None or layer.kind == "input":
            continue
        found, expected = _expected_at(shape_result, lpath) if shape_result is not None else (False, None)
        if not found or expected is None:
            expected = expected_weights(layer)
        stored = {w.name: w for w in layer.weights}
        if expected is not None and not keras1:
            dead = layer.depth is None
            stored = _pair_unnamed(stored, expected)
            for name, shape in expected.items():
                if name not in stored:
                    if dead or layer.kind == "op":
                        continue
                    issues.append(
                        make_issue(
                            "WGT001",
                            f"{layer.class_name} layer '{'/'.join(lpath)}' has no weight '{name}' "
                            f"(expected shape {_fmt(shape)}); it stores {sorted(stored) or 'none'}",
                            _where(lpath, layer),
                            path=path,
                        )
                    )
                elif (lpath, name) not in skip_shapes and not _same(tuple(stored[name].shape), tuple(shape)):
                    issues.append(
                        make_issue(
                            "WGT003",
                            f"weight '{name}' of {layer.class_name} layer '{'/'.join(lpath)}' has shape "
                            f"{_fmt(stored[name].shape)}; its config implies {_fmt(shape)}",
                            _where(lpath, layer, stored[name]),
                            path=path,
                        )
                    )
            for name, w in stored.items():
                if name not in expected:
                    issues.append(
                        make_issue(
                            "WGT002",
                            f"{layer.class_name} layer '{'/'.join(lpath)}' stores weight '{name}' "
                            f"{_fmt(w.shape)} that its config does not create (expected {sorted(expected) or 'none'})",
                            _where(lpath, layer, w),
                            path=path,
                        )
                    )
        issues.extend(_dtype_issues(lpath, layer, path))
        if check_values:
            for w in layer.weights:
                issues.extend(_value_issues(lpath, layer, w, path))
    return issues


def _is_unnamed(name: str) -> bool:
    base = name.rsplit(":", 1)[-1]
    return base.startswith("var_") and base[4:].isdigit()


def _pair_unnamed(stored: dict[str, Weight], expected: Mapping[str, Any]) -> dict[str, Weight]:
    """Give positional names (``vars:var_2``, left by a binder that did not know the name) the
    expected names that are missing, in order, when their counts agree."""
    unnamed = [n for n in stored if _is_unnamed(n) and n not in expected]
    missing = [n for n in expected if n not in stored]
    if not unnamed or len(unnamed) != len(missing):
        return stored
    out = {n: w for n, w in stored.items() if n not in unnamed}
    for want, have in zip(missing, unnamed, strict=True):
        out[want] = stored[have]
    return out


def _dtype_issues(lpath: tuple[str, ...], layer: Layer, path: str) -> list[Issue]:
    out: list[Issue] = []
    want = variable_dtype(layer)
    if want is None:
        return out
    for w in layer.weights:
        if _base(w.name) not in _FLOAT_NAMES:
            continue
        have = w.dtype
        try:
            kind = "f" if have == "bfloat16" else np.dtype(have).kind
        except TypeError:
            kind = "?"
        label = "/".join(lpath)
        if kind != "f":
            out.append(
                make_issue(
                    "WGT004",
                    f"weight '{w.name}' of {layer.class_name} layer '{label}' is stored as {have}; "
                    f"the layer's variables are {want}",
                    _where(lpath, layer, w),
                    path=path,
                )
            )
        elif have != want:
            out.append(
                make_issue(
                    "WGT005",
                    f"weight '{w.name}' of {layer.class_name} layer '{label}' is stored as {have}; "
                    f"the layer's variables are {want}",
                    _where(lpath, layer, w),
                    path=path,
                )
            )
    return out


# --- values -------------------------------------------------------------------------------------


def _h5_dataset(weight: Weight) -> Any:
    """The h5py dataset behind a weight's reader, when the reader is an HDF5 one (else None)."""
    try:
        import h5py
    except ImportError:  # pragma: no cover - h5py is a dependency
        return None
    reader = weight.reader
    candidates = list(getattr(reader, "__defaults__", None) or ())
    for cell in getattr(reader, "__closure__", None) or ():
        try:
            candidates.append(cell.cell_contents)
        except ValueError:
            continue
    for c in candidates:
        if isinstance(c, h5py.Dataset):
            return c
    return None


def iter_chunks(weight: Weight, chunk_bytes: int = CHUNK_BYTES) -> Iterator[np.ndarray]:
    """A weight's values as float-or-int arrays of at most about ``chunk_bytes`` each.

    HDF5 datasets are sliced along their first axis after safe_io's checks (never more than one slab
    in memory); other storage is read whole up to :data:`WHOLE_READ_LIMIT`.
    """
    from modelgraph import safe_io
    from modelgraph.errors import FormatError, SecurityError

    dset = _h5_dataset(weight)
    if dset is None:
        if weight.nbytes > WHOLE_READ_LIMIT:
            raise FormatError(f"weight is {weight.nbytes:,} bytes and its storage cannot be read in slabs")
        yield np.asarray(weight.read())
        return
    problems = safe_io.dataset_problems(dset)
    if problems:
        raise SecurityError(problems[0][1])
    dt = dset.dtype
    bf16 = dt.kind == "V" and dt.itemsize == 2
    if not bf16 and (dt.kind not in "biuf" or dt.fields is not None):
        raise FormatError(f"dataset {dset.name} has unsupported dtype {dt}")
    # Keras writes bfloat16 as opaque 2-byte data (legacy .h5 without a dtype attribute, too).
    if not dset.shape:
        slabs: list[tuple[Any, str]] = [((), "()")]
    else:
        rows = int(dset.shape[0])
        row_bytes = max(1, weight.nbytes // max(1, rows))
        step = max(1, chunk_bytes // row_bytes)
        slabs = [(slice(a, a + step), f"[{a}:{a + step}]") for a in range(0, rows, step)]
    for sel, label in slabs:
        try:
            raw = np.asarray(dset[sel])
        except (OSError, ValueError, TypeError) as exc:
            raise FormatError(f"cannot read {dset.name}{label}: {exc}") from None
        if bf16:
            raw = (
                (np.frombuffer(raw.tobytes(), dtype="<u2").astype("<u4") << 16).view("<f4").reshape(raw.shape)
            )
        yield raw


def _value_issues(lpath: tuple[str, ...], layer: Layer, w: Weight, path: str) -> list[Issue]:
    label = "/".join(lpath)
    nonfinite = 0
    nan = 0
    nonzero = False
    try:
        for chunk in iter_chunks(w):
            if chunk.dtype.kind == "f":
                finite = np.isfinite(chunk)
                if not finite.all():
                    bad = int(finite.size - np.count_nonzero(finite))
                    nonfinite += bad
                    nan += int(np.count_nonzero(np.isnan(chunk)))
            if not nonzero and np.any(chunk):
                nonzero = True
    except (ModelGraphError, OSError, ValueError, TypeError, MemoryError) as exc:
        return [
            make_issue(
                "WGT009",
                f"weight '{w.name}' of layer '{label}' ({w.location}) cannot be read: {exc}",
                _where(lpath, layer, w),
                path=path,
            )
        ]
    out: list[Issue] = []
    if nonfinite:
        out.append(
            make_issue(
                "WGT006",
                f"weight '{w.name}' {_fmt(w.shape)} of layer '{label}' has {nonfinite:,} non-finite value(s) "
                f"({nan:,} NaN, {nonfinite - nan:,} Inf) out of {w.size:,}",
                _where(lpath, layer, w),
                path=path,
            )
        )
    if not nonzero and w.size > 0 and _base(w.name) in _KERNEL_NAMES:
        out.append(
            make_issue(
                "WGT007",
                f"{_base(w.name)} '{w.name}' {_fmt(w.shape)} of {layer.class_name} layer '{label}' is all zeros",
                _where(lpath, layer, w),
                path=path,
            )
        )
    return out
