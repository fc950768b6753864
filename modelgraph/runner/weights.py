"""A layer's stored weights as the kernels and the ONNX lowerings read them: lazily, once."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np

from modelgraph.graph import Weight


class LazyWeights(Mapping[str, np.ndarray]):
    """A layer's weights by canonical name, read from the file on first access.

    The cache is dropped once the kernel is built (:meth:`release`): kernels keep what they need in
    the form they need (pre-transformed), and the raw arrays are not held twice.
    """

    def __init__(
        self, weights: Sequence[Weight], transform: Callable[[np.ndarray], np.ndarray] | None = None
    ):
        self._weights = {w.name: w for w in weights}
        self._cache: dict[str, np.ndarray] = {}
        self._transform = transform

    def __getitem__(self, name: str) -> np.ndarray:
        try:
            return self._cache[name]
        except KeyError:
            pass
        w = self._weights[name]
        value = w.read()
        if self._transform is not None:
            value = self._transform(value)
        self._cache[name] = value
        return value

    def __contains__(self, name: object) -> bool:
        return name in self._weights

    def __iter__(self) -> Iterator[str]:
        return iter(self._weights)

    def __len__(self) -> int:
        return len(self._weights)

    @property
    def nbytes(self) -> int:
        return sum(w.nbytes for w in self._weights.values())

    def release(self) -> None:
        self._cache.clear()
