"""Plugins: Python modules the user names, which teach the catalogue custom classes and functions.

A plugin is one module that registers descriptors through the catalogue's public API
(:func:`modelgraph.catalogue.register`, ``register_activation``, ``register_initializer``,
``register_function``) when it is imported. It is loaded only because the user named it:

* ``--plugin REF`` on the command line (repeatable, before or after the command name),
* the ``MODELGRAPH_PLUGINS`` environment variable (references separated by ``os.pathsep``),
* :func:`load_plugin` from Python.

A reference is a file (``my_layers.py``), an importable module (``my_package.modelgraph_plugin``)
or an installed package's entry point in the ``modelgraph.plugins`` group (``entry:NAME``). Entry
points are never loaded unless named that way, and nothing a model file says ever loads a plugin.
Everything a plugin does wrong (it is missing, it raises, it registers nonsense or a built-in name
without ``replace=True``) is one :class:`~modelgraph.errors.PluginError` naming the plugin.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import ModuleType

from modelgraph.errors import CatalogueError, PluginError

ENV_VAR = "MODELGRAPH_PLUGINS"
ENTRY_POINT_GROUP = "modelgraph.plugins"
ENTRY_PREFIX = "entry:"

_LOADED: dict[str, ModuleType | object] = {}


def load_plugin(ref: str) -> str:
    """Load one plugin by reference (a ``.py`` file, a module name or ``entry:NAME``) and return its
    name. Loading the same reference again does nothing."""
    ref = ref.strip()
    if not ref:
        raise PluginError("plugin: an empty plugin reference")
    key = _key(ref)
    if key in _LOADED:
        return _name(ref)
    name = _name(ref)
    from modelgraph import catalogue

    try:
        with catalogue.plugin_scope(name):
            _LOADED[key] = _import(ref, name)
    except PluginError:
        raise
    except CatalogueError as exc:
        raise PluginError(f"plugin '{ref}' registers something the catalogue refuses: {exc}") from None
    except BaseException as exc:  # noqa: BLE001 - a plugin's own code: whatever it raises is one line
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        raise PluginError(f"plugin '{ref}' failed while loading: {type(exc).__name__}: {exc}") from None
    return name


def load_plugins(refs: Iterable[str]) -> list[str]:
    """Load several plugins in order; the names of those loaded."""
    return [load_plugin(ref) for ref in refs]


def env_plugins(environ: os._Environ[str] | dict[str, str] | None = None) -> list[str]:
    """The references in ``MODELGRAPH_PLUGINS`` (empty parts skipped)."""
    value = (os.environ if environ is None else environ).get(ENV_VAR, "")
    return [part.strip() for part in value.split(os.pathsep) if part.strip()]


def loaded() -> list[str]:
    """The references of the plugins loaded so far, in order."""
    return list(_LOADED)


@contextlib.contextmanager
def scratch() -> Iterator[None]:
    """Plugins loaded inside, and everything they registered, are forgotten on leaving."""
    from modelgraph import catalogue

    loaded_before = dict(_LOADED)
    modules_before = set(sys.modules)
    with catalogue.scratch():
        try:
            yield
        finally:
            _LOADED.clear()
            _LOADED.update(loaded_before)
            for name in set(sys.modules) - modules_before:
                if name.startswith("modelgraph_plugin_"):
                    del sys.modules[name]


def _key(ref: str) -> str:
    if _is_file(ref):
        return str(Path(ref).resolve())
    return ref


def _is_file(ref: str) -> bool:
    return ref.endswith(".py") or os.sep in ref or (os.altsep is not None and os.altsep in ref)


def _name(ref: str) -> str:
    if ref.startswith(ENTRY_PREFIX):
        return ref[len(ENTRY_PREFIX) :]
    if _is_file(ref):
        return Path(ref).stem
    return ref


def _import(ref: str, name: str) -> ModuleType | object:
    if ref.startswith(ENTRY_PREFIX):
        return _entry_point(ref, name)
    if _is_file(ref):
        return _file(ref, name)
    if importlib.util.find_spec(ref.split(".", 1)[0]) is None:
        raise PluginError(f"plugin '{ref}': no module named {ref.split('.', 1)[0]!r} (and no such .py file)")
    return importlib.import_module(ref)


def _file(ref: str, name: str) -> ModuleType:
    path = Path(ref)
    if not path.is_file():
        raise PluginError(f"plugin '{ref}': no such file")
    module_name = f"modelgraph_plugin_{name}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise PluginError(f"plugin '{ref}': not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


def _entry_point(ref: str, name: str) -> object:
    import importlib.metadata  # only for entry points: ~45 ms

    found = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP, name=name)
    if not found:
        installed = sorted(ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
        listed = f"installed: {', '.join(installed)}" if installed else "none is installed"
        raise PluginError(
            f"plugin '{ref}': no entry point {name!r} in group '{ENTRY_POINT_GROUP}' ({listed})"
        )
    loaded = next(iter(found)).load()
    if callable(loaded) and not isinstance(loaded, type):
        loaded()  # an entry point may name a function that registers, or a module that does on import
    return loaded


__all__ = ["ENTRY_POINT_GROUP", "ENV_VAR", "env_plugins", "load_plugin", "load_plugins", "loaded", "scratch"]
