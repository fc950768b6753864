# Development-only shims so Keras 1.2.2 + Theano 1.0.5 import on Python 3.11 (never shipped).
import inspect
from collections import namedtuple

if not hasattr(inspect, "getargspec"):
    _ArgSpec = namedtuple("ArgSpec", "args varargs keywords defaults")

    def getargspec(func):
        spec = inspect.getfullargspec(func)
        return _ArgSpec(spec.args, spec.varargs, spec.varkw, spec.defaults)

    inspect.getargspec = getargspec

import collections
import collections.abc

for _name in ("Iterable", "Mapping", "MutableMapping", "Sequence", "Callable", "OrderedDict"):
    if not hasattr(collections, _name):
        setattr(collections, _name, getattr(collections.abc, _name))


def _theano_ifelse_on_import():
    # Keras 1's Theano backend calls theano.ifelse.ifelse without importing the submodule.
    import importlib.abc
    import sys

    class _Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == "keras.backend.theano_backend":
                import theano
                import theano.ifelse  # noqa: F401

                sys.meta_path.remove(self)
            return None

    sys.meta_path.insert(0, _Finder())


_theano_ifelse_on_import()


def _scipy_private_signal_modules():
    # Theano's Python convolution imports scipy.signal's private helpers from their pre-1.8 places.
    import sys

    try:
        from scipy.signal import _signaltools, _sigtools
    except ImportError:
        return
    sys.modules["scipy.signal.signaltools"] = _signaltools
    sys.modules["scipy.signal.sigtools"] = _sigtools


_scipy_private_signal_modules()
