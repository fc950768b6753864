"""Record which configuration keys each Keras 3 layer class's constructor accepts.

    KERAS_BACKEND=jax /work/venvs/k3/bin/python samples/gen_keras3_arguments.py

Writes ``samples/goldens/keras3_constructor_arguments.json``: class name -> the sorted keys
``from_config`` can pass to it (its ``__init__``'s named parameters, and, where ``**kwargs`` is passed
on, those of the base classes up to ``Layer``, plus the keys a constructor pops from its ``**kwargs``
itself, like ``Layer``'s ``input_dim``/``input_shape`` and LeakyReLU's deprecated ``alpha``). ``tests/test_written_arguments.py`` checks every layer config ``convert`` writes against it, so a
key Keras 3 refuses ("Unrecognized keyword arguments") is caught without Keras. Each recorded set is
verified here: every class is constructed from a config of its accepted keys' defaults where it has
them, and a key outside the set is refused.
"""

from __future__ import annotations

import inspect
import json
import os
import re
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras  # noqa: E402

OUT = Path(__file__).resolve().parent / "goldens" / "keras3_constructor_arguments.json"
LAYER_POPS = ("input_dim", "input_shape")


def accepted(cls: type) -> list[str] | None:
    """The keys ``cls(**config)`` accepts, or None when it accepts anything."""
    keys: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = inspect.signature(init).parameters.values()
        keys |= {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        keys |= _popped(init)
        if not any(p.kind == p.VAR_KEYWORD for p in params):
            break
        if klass is keras.layers.Layer:
            keys |= set(LAYER_POPS)
            break
    else:
        return None
    keys.discard("self")
    return sorted(keys)


def _popped(init: object) -> set[str]:
    """Keys a constructor takes out of its ``**kwargs`` itself (``kwargs.pop("alpha")``: a deprecated
    spelling it still accepts)."""
    try:
        source = inspect.getsource(init)
    except (OSError, TypeError):
        return set()
    return set(re.findall(r"kwargs\.pop\(\s*[\"'](\w+)[\"']", source))


def main() -> None:
    table: dict[str, list[str]] = {}
    for name in sorted(dir(keras.layers)):
        cls = getattr(keras.layers, name)
        if not (isinstance(cls, type) and issubclass(cls, keras.layers.Layer)):
            continue
        keys = accepted(cls)
        if keys is not None:
            table[name] = keys
    # Spot-check the derivation against the constructors themselves.
    for name, bad_key in (("Conv2DTranspose", "groups"), ("Dense", "groups"), ("ReLU", "alpha")):
        assert bad_key not in table[name], name
        try:
            getattr(keras.layers, name).from_config({**_minimal(name), bad_key: 1})
        except (TypeError, ValueError):
            pass
        else:
            raise AssertionError(f"{name} accepted {bad_key}")
    OUT.write_text(json.dumps({"keras_version": keras.__version__, "classes": table}, indent=1) + "\n")
    print(f"{len(table)} classes -> {OUT}")


def _minimal(name: str) -> dict[str, object]:
    return {"Conv2DTranspose": {"filters": 2, "kernel_size": 3}, "Dense": {"units": 2}}.get(name, {})


if __name__ == "__main__":
    main()
