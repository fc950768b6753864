"""Modules that are also the public function of the same name (``modelgraph.render``, ``.diff``, ...).

``modelgraph.render`` is exported as a function, but importing the submodule ``modelgraph.render``
makes Python bind the module to that package attribute, shadowing the function. Making such a
module callable (forwarding to its function) keeps ``modelgraph.render(graph, "m.svg")`` working
whichever of the two is bound.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any


class _CallableModule(types.ModuleType):
    _target: tuple[str, str]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        module_name, function_name = self._target
        return getattr(importlib.import_module(module_name), function_name)(*args, **kwargs)


def make_callable(module_name: str, target_module: str, function_name: str) -> None:
    """Make the module ``module_name`` callable as ``target_module.function_name``."""
    module = sys.modules[module_name]
    module.__class__ = _CallableModule
    module._target = (target_module, function_name)  # type: ignore[attr-defined]
