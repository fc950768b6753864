"""A model's training state, carried into a Keras 3 ``.keras``: ``compile_config`` and optimizer variables.

Keras 3 compiles a loaded model from ``compile_config`` (optimizer, loss, metrics) and then restores
the optimizer's variables from ``optimizer/vars/<i>`` of ``model.weights.h5``, by position. Older
files store a Keras 1/2 ``training_config`` and name their optimizer variables; this module upgrades
the config (tf.keras-only arguments dropped, ``lr`` renamed, a legacy ``decay`` written as the
``InverseTimeDecay`` schedule it was) and lays the variables out in Keras 3's order. What cannot be
carried faithfully is left out with a note saying so: the model itself still converts. See
``docs/writing.md`` ("Training state").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from modelgraph.graph import Weight
from modelgraph.loading.training import TrainingRecord
from modelgraph.saving.optimizers import (
    BASE_ARGUMENTS,
    OPTIMIZERS,
    READ_ARGUMENTS,
    TF_KERAS_ONLY,
    arguments_of,
)

_KERAS3_DEFAULTS = {"run_eagerly": False, "steps_per_execution": 1, "jit_compile": False}
_REDUCTIONS = {
    "auto": "sum_over_batch_size",
    "sum_over_batch_size": "sum_over_batch_size",
    "sum": "sum",
    "none": None,
}


class NotCarried(Exception):
    """Part of the training state has no faithful Keras 3 form (the message says which and why)."""


@dataclass
class TrainingState:
    """What the writer stores: the ``compile_config`` (or None), the optimizer's variables in Keras 3's
    order (or None) and notes for the user."""

    compile_config: dict[str, Any] | None = None
    optimizer_variables: list[np.ndarray] | None = None
    optimizer_name: str | None = None
    notes: list[str] = field(default_factory=list)


def training_state(record: TrainingRecord | None, stored: Sequence[Weight]) -> TrainingState:
    """The Keras 3 training state for ``record``; ``stored`` lists every model variable the writer
    stores, in Keras 3's order (its trainable variables are those the optimizer keeps slots for)."""
    state = TrainingState()
    if record is None:
        return state
    try:
        state.compile_config = compile_config(record)
    except NotCarried as exc:
        state.notes.append(f"the training config is not written: {exc}")
        return state
    optimizer = state.compile_config["optimizer"]
    state.optimizer_name = optimizer["config"].get("name")
    if not record.variables:
        return state
    try:
        state.optimizer_variables = optimizer_variables(record, optimizer, stored)
    except NotCarried as exc:
        state.notes.append(f"optimizer state is not written ({exc}); the optimizer starts afresh")
    return state


# --- compile_config ----------------------------------------------------------------------------------


def compile_config(record: TrainingRecord) -> dict[str, Any]:
    """Keras 3's ``compile_config`` for a stored training/compile config."""
    config = record.config
    if record.form == "training_config":
        optimizer = config.get("optimizer_config")
    else:
        optimizer = config.get("optimizer")
    out: dict[str, Any] = {"optimizer": _optimizer(optimizer)}
    out["loss"] = _losses(config.get("loss"))
    out["loss_weights"] = config.get("loss_weights")
    out["metrics"] = _metrics(config.get("metrics"))
    out["weighted_metrics"] = _metrics(config.get("weighted_metrics"))
    for key, default in _KERAS3_DEFAULTS.items():
        value = config.get(key)
        out[key] = default if value is None else value
    return out


def _class_and_config(entry: Any, what: str) -> tuple[str, dict[str, Any]]:
    if isinstance(entry, str):
        return entry, {}
    if not isinstance(entry, Mapping) or not isinstance(entry.get("class_name"), str):
        raise NotCarried(f"{what} {entry!r} is not a class and its config")
    config = entry.get("config")
    return entry["class_name"], dict(config) if isinstance(config, Mapping) else {}


def _optimizer(entry: Any) -> dict[str, Any]:
    if entry is None:
        raise NotCarried("it names no optimizer")
    class_name, config = _class_and_config(entry, "optimizer")
    class_name = class_name.removeprefix("Custom>")  # tf.keras registered its new optimizers so
    allowed = arguments_of(class_name)
    if allowed is None:
        raise NotCarried(f"optimizer {class_name!r} has no Keras 3 equivalent")
    if "lr" in config:
        config.setdefault("learning_rate", config.pop("lr"))
    decay = config.pop("decay", None)
    if decay is not None and (isinstance(decay, bool) or not isinstance(decay, int | float)):
        raise NotCarried(f"optimizer {class_name} decay={decay!r} is not a number")
    if decay:  # the legacy optimizers' lr / (1 + decay * iterations)
        config["learning_rate"] = _schedule(
            "InverseTimeDecay",
            {
                "initial_learning_rate": config.get("learning_rate", 0.001),
                "decay_steps": 1,
                "decay_rate": decay,
                "staircase": False,
                "name": "InverseTimeDecay",
            },
        )
    elif isinstance(config.get("learning_rate"), Mapping):
        name, schedule = _class_and_config(config["learning_rate"], "learning rate schedule")
        config["learning_rate"] = _schedule(name, schedule)
    for key in sorted(set(config) - allowed):
        value = config.pop(key)
        if key not in TF_KERAS_ONLY and value not in (None, False, 0, 0.0):
            raise NotCarried(f"optimizer {class_name} argument {key}={value!r} has no Keras 3 equivalent")
    for key, default in BASE_ARGUMENTS.items():
        if key != "name":
            config.setdefault(key, default)
    for key, types in READ_ARGUMENTS.items():
        if key in config and not isinstance(config[key], types):
            raise NotCarried(
                f"optimizer {class_name} argument {key}={config[key]!r} is not a {types[0].__name__}"
            )
    return {"module": "keras.optimizers", "class_name": class_name, "config": config, "registered_name": None}


def _schedule(class_name: str, config: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "module": "keras.optimizers.schedules",
        "class_name": class_name,
        "config": dict(config),
        "registered_name": None,
    }


def _losses(loss: Any) -> Any:
    if loss is None or isinstance(loss, str):
        return loss
    if isinstance(loss, list):
        return [_losses(item) for item in loss]
    if isinstance(loss, Mapping) and "class_name" not in loss:
        return {key: _losses(value) for key, value in loss.items()}
    class_name, config = _class_and_config(loss, "loss")
    config.pop("fn", None)  # tf.keras's LossFunctionWrapper names its function; Keras 3 knows it
    if "reduction" in config:
        reduction = config["reduction"]
        if not isinstance(reduction, str) or reduction not in _REDUCTIONS:
            raise NotCarried(f"loss {class_name} reduction {reduction!r} has no Keras 3 equivalent")
        config["reduction"] = _REDUCTIONS[reduction]
    return {"module": "keras.losses", "class_name": class_name, "config": config, "registered_name": None}


def _metrics(metrics: Any) -> Any:
    if metrics is None or isinstance(metrics, str):
        return metrics
    if isinstance(metrics, list):
        items = [_metrics(item) for item in metrics]
        # tf.keras nests a single output's metrics in a list of its own: [[m1, m2]]
        return items[0] if len(items) == 1 and isinstance(items[0], list) else items
    if isinstance(metrics, Mapping) and "class_name" not in metrics:
        return {key: _metrics(value) for key, value in metrics.items()}
    class_name, config = _class_and_config(metrics, "metric")
    if class_name == "MeanMetricWrapper":  # a metric function by name (tf.keras's "accuracy" etc.)
        fn = config.get("fn")
        if not isinstance(fn, str):
            raise NotCarried(f"metric {config.get('name')!r} wraps an unnamed function")
        return fn
    return {"module": "keras.metrics", "class_name": class_name, "config": config, "registered_name": None}


# --- optimizer variables -----------------------------------------------------------------------------

_NEW_NAME = re.compile(r"^[^/]+/(?P<slot>[^/]+)/(?P<var>.+):\d+$")  # Adam/m/dense/kernel:0
_LEGACY_NAME = re.compile(r"^[^/]+/(?P<var>.+)/(?P<slot>[^/]+):\d+$")  # Adam/dense/kernel/m:0


def optimizer_variables(
    record: TrainingRecord, optimizer: Mapping[str, Any], stored: Sequence[Weight]
) -> list[np.ndarray]:
    """The optimizer's variables in Keras 3's order (``optimizer`` is the Keras 3 config written)."""
    class_name = optimizer["class_name"]
    config = optimizer["config"]
    spec = OPTIMIZERS.get(class_name)
    if spec is None:
        raise NotCarried(f"Keras 3's {class_name} keeps state beyond per-variable slots")
    if config.get("use_ema") or config.get("gradient_accumulation_steps"):
        raise NotCarried("exponential moving averages and gradient accumulation keep extra variables")
    names = record.names
    if not any(names):
        return _positional(record)
    slots_by_name = dict(zip(names, record.variables, strict=True))
    paths = [variable_path(w) for w in stored]
    iteration, learning_rate, slots = _parse_names(record, spec, {p for p in paths if p})
    with_slots = {var for var, _ in slots}
    trainable = [p for p in paths if p in with_slots]
    ordered: list[np.ndarray] = [np.asarray(slots_by_name[iteration].read()).astype(np.int64).reshape(())]
    if not isinstance(config.get("learning_rate"), Mapping):
        value = slots_by_name[learning_rate].read() if learning_rate else config["learning_rate"]
        ordered.append(np.asarray(value, dtype=np.float32).reshape(()))
    groups = spec.slot_groups(config)
    wanted = {(var, slot) for group in groups for slot in group for var in trainable}
    if set(slots) != wanted:
        missing = sorted(f"{var}:{slot}" for var, slot in wanted - set(slots))
        extra = sorted(f"{var}:{slot}" for var, slot in set(slots) - wanted)
        raise NotCarried(
            "the stored slots do not match Keras 3's "
            + class_name
            + (f"; missing {missing[:3]}" if missing else "")
            + (f"; unexpected {extra[:3]}" if extra else "")
        )
    for group in groups:
        for var in trainable:
            for slot in group:
                ordered.append(np.asarray(slots_by_name[slots[(var, slot)]].read()))
    return ordered


def _positional(record: TrainingRecord) -> list[np.ndarray]:
    """A ``.keras`` file's unnamed variables: Keras 3's own order when Keras 3 wrote them."""
    if not (record.writer or "").startswith("3."):
        raise NotCarried("tf.keras's .keras files do not name the optimizer's variables")
    return [np.asarray(v.read()) for v in record.variables]


def variable_path(weight: Weight) -> str | None:
    """The name Keras gave a model variable in a legacy ``.h5`` (``dense/kernel``, from
    ``model_weights/<layer>/dense/kernel:0``), which its optimizer's variables repeat; None elsewhere."""
    _, found, tail = weight.location.partition(":/model_weights/")
    if not found or "/" not in tail:
        return None
    return tail.split("/", 1)[1].removesuffix(":0")


def _parse_names(
    record: TrainingRecord, spec: Any, known: set[str]
) -> tuple[str, str | None, dict[tuple[str, str], str]]:
    """The stored names of the step counter, the learning rate (Keras 3 files only) and each
    ``(variable path, Keras 3 slot)``."""
    names = list(record.names)
    slots: dict[tuple[str, str], str] = {}
    if (record.writer or "").startswith("3."):
        by_flat = {path.replace("/", "_"): path for path in known}
        # Keras 3's slot names, longest first (``velocity_hat`` before ``velocity``)
        slot_names = sorted({*spec.new_slots.values(), *spec.legacy_slots.values()}, key=len, reverse=True)
        iteration = _one(names, lambda n: n.endswith("/iteration"), "step counter")
        lr = next((n for n in names if n.endswith("/learning_rate")), None)
        for name in names:
            if name in (iteration, lr):
                continue
            tail = name.split("/", 1)[-1]  # <variable path with "_" for "/">_<slot>
            match = next(
                (
                    (by_flat[tail[: -len(slot) - 1]], slot)
                    for slot in slot_names
                    if tail.endswith("_" + slot) and tail[: -len(slot) - 1] in by_flat
                ),
                None,
            )
            if match is None:
                raise NotCarried(f"optimizer variable {name!r} belongs to no model variable")
            slots[match] = name
        return iteration, lr, slots
    legacy = any(n.endswith("/iter:0") for n in names)
    iteration = _one(names, lambda n: n in ("iteration:0",) or n.endswith("/iter:0"), "step counter")
    pattern, table = (_LEGACY_NAME, spec.legacy_slots) if legacy else (_NEW_NAME, spec.new_slots)
    for name in names:
        if name == iteration:
            continue
        found = pattern.match(name)
        if found is None or found["slot"] not in table or found["var"] not in known:
            raise NotCarried(f"optimizer variable {name!r} belongs to no model variable")
        slots[(found["var"], table[found["slot"]])] = name
    return iteration, None, slots


def _one(names: Iterable[str], test: Any, what: str) -> str:
    found = [n for n in names if test(n)]
    if len(found) != 1:
        raise NotCarried(f"no single {what} among the optimizer's variables")
    return found[0]
