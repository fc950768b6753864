"""Keras 3's optimizers, as a writer of their saved state needs to know them.

Each entry says which constructor arguments the Keras 3 class takes, which variables it creates per
trainable model variable (and in which groups: Keras 3 creates a group's slots variable by variable,
then the next group), and how tf.keras named those slots: new-style tf.keras optimizers store
``<opt>/<slot>/<variable>:0``, legacy ones (``tf.keras.optimizers.legacy``, Keras 2.x) store
``<opt>/<variable>/<slot>:0``. Keras 3's own optimizer variables come first: the step counter
``iteration`` and, unless the learning rate is a schedule, ``learning_rate``. See
``docs/writing.md`` ("Training state").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Arguments every Keras 3 optimizer takes (keras.optimizers.Optimizer), with their defaults.
BASE_ARGUMENTS: Mapping[str, Any] = {
    "name": None,
    "learning_rate": 0.001,
    "weight_decay": None,
    "clipnorm": None,
    "clipvalue": None,
    "global_clipnorm": None,
    "use_ema": False,
    "ema_momentum": 0.99,
    "ema_overwrite_frequency": None,
    "loss_scale_factor": None,
    "gradient_accumulation_steps": None,
}

#: The arguments the writer itself reads (the variables' layout, the learning-rate variable, the
#: optimizer's name in the weights file), with the JSON types Keras writes for them.
READ_ARGUMENTS: Mapping[str, tuple[type, ...]] = {
    "name": (str, type(None)),
    "learning_rate": (int, float, Mapping),
    "momentum": (int, float, type(None)),
    "centered": (bool,),
    "amsgrad": (bool,),
    "use_ema": (bool,),
    "gradient_accumulation_steps": (int, type(None)),
}

# tf.keras-only arguments that say nothing about the update rule.
TF_KERAS_ONLY = frozenset({"jit_compile", "is_legacy_optimizer", "mesh"})

SlotGroups = Callable[[Mapping[str, Any]], tuple[tuple[str, ...], ...]]


@dataclass(frozen=True)
class OptimizerSpec:
    """One Keras 3 optimizer class."""

    arguments: frozenset[str]
    slot_groups: SlotGroups
    new_slots: Mapping[str, str] = field(default_factory=dict)  # tf.keras slot name -> Keras 3's
    legacy_slots: Mapping[str, str] = field(default_factory=dict)  # tf.keras legacy slot -> Keras 3's


def _args(*names: str) -> frozenset[str]:
    return frozenset(BASE_ARGUMENTS) | frozenset(names)


def _adam_groups(config: Mapping[str, Any]) -> tuple[tuple[str, ...], ...]:
    return (
        (("momentum", "velocity"), ("velocity_hat",))
        if config.get("amsgrad")
        else (("momentum", "velocity"),)
    )


def _sgd_groups(config: Mapping[str, Any]) -> tuple[tuple[str, ...], ...]:
    return (("momentum",),) if config.get("momentum", 0.0) else ()


def _rmsprop_groups(config: Mapping[str, Any]) -> tuple[tuple[str, ...], ...]:
    groups: list[tuple[str, ...]] = [("velocity",)]
    if (config.get("momentum") or 0.0) > 0:
        groups.append(("momentum",))
    if config.get("centered"):
        groups.append(("average_gradient",))
    return tuple(groups)


def _fixed(*groups: tuple[str, ...]) -> SlotGroups:
    return lambda config: groups


_ADAM_SLOTS = {"m": "momentum", "v": "velocity", "vhat": "velocity_hat"}

OPTIMIZERS: Mapping[str, OptimizerSpec] = {
    "Adam": OptimizerSpec(
        _args("beta_1", "beta_2", "epsilon", "amsgrad"), _adam_groups, _ADAM_SLOTS, _ADAM_SLOTS
    ),
    "AdamW": OptimizerSpec(
        _args("beta_1", "beta_2", "epsilon", "amsgrad"), _adam_groups, _ADAM_SLOTS, _ADAM_SLOTS
    ),
    "SGD": OptimizerSpec(
        _args("momentum", "nesterov"), _sgd_groups, {"m": "momentum"}, {"momentum": "momentum"}
    ),
    "RMSprop": OptimizerSpec(
        _args("rho", "momentum", "epsilon", "centered"),
        _rmsprop_groups,
        {"velocity": "velocity", "momentum": "momentum", "average_gradient": "average_gradient"},
        {"rms": "velocity", "momentum": "momentum", "mg": "average_gradient"},
    ),
    "Adagrad": OptimizerSpec(
        _args("initial_accumulator_value", "epsilon"),
        _fixed(("accumulator",)),
        {"accumulator": "accumulator"},
        {"accumulator": "accumulator"},
    ),
    "Adadelta": OptimizerSpec(
        _args("rho", "epsilon"),
        _fixed(("accumulated_grad", "accumulated_delta_var")),
        {"accumulated_grad": "accumulated_grad", "accumulated_delta_var": "accumulated_delta_var"},
        {"accum_grad": "accumulated_grad", "accum_var": "accumulated_delta_var"},
    ),
    "Adamax": OptimizerSpec(
        _args("beta_1", "beta_2", "epsilon"),
        _fixed(("momentum", "norm")),
        {"m": "momentum", "u": "norm"},
        {"m": "momentum", "v": "norm"},
    ),
    "Ftrl": OptimizerSpec(
        _args(
            "learning_rate_power",
            "initial_accumulator_value",
            "l1_regularization_strength",
            "l2_regularization_strength",
            "l2_shrinkage_regularization_strength",
            "beta",
        ),
        _fixed(("accumulator", "linear")),
        {"accumulator": "accumulator", "linear": "linear"},
        {"accumulator": "accumulator", "linear": "linear"},
    ),
    "Lion": OptimizerSpec(_args("beta_1", "beta_2"), _fixed(("momentum",)), {"m": "momentum"}, {}),
}

# Keras 3 optimizers whose state has more than per-variable slots (Nadam's running u-product):
# their configs are carried, their state is not.
CONFIG_ONLY = {"Nadam": _args("beta_1", "beta_2", "epsilon")}


def arguments_of(class_name: str) -> frozenset[str] | None:
    """The constructor arguments of Keras 3's optimizer ``class_name``, or None when unknown."""
    spec = OPTIMIZERS.get(class_name)
    return spec.arguments if spec is not None else CONFIG_ONLY.get(class_name)
