"""modelgraph's own activations are registered through ``catalogue.register_activation``, the call a
plugin makes, and the runner and the ONNX exporter read them from that one registry.

``hard_sigmoid`` means one function in files of Keras 1/2 and another in Keras 3's: it is registered
once per meaning, and every reader picks the entry of the version that wrote the file. The numbers
are Keras's definitions (``clip(0.2x + 0.5, 0, 1)``, ``relu6(x + 3) / 6``); the Keras goldens of each
activation are replayed by tests/runner/test_activations.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from modelgraph import catalogue, plugins
from modelgraph.catalogue import activations as declared
from modelgraph.errors import CatalogueError, UnsupportedConfigError
from modelgraph.runner.activations import activation_name, get_activation
from modelgraph.runner.registry import KernelSpec

X = np.array([[-4.0, -2.5, -1.0, -0.2, 0.0, 0.3, 1.0, 2.5, 4.0, 7.0]], np.float32)
K2, K3 = (2, 15, 0), (3, 15, 1)


@pytest.fixture
def scratch():
    with plugins.scratch():
        yield


def _builtin(name: str) -> list[catalogue.FunctionSpec]:
    return [
        f
        for f in catalogue.functions()
        if f.kind == "activation" and f.name == name and f.family == "builtin"
    ]


def test_every_builtin_is_registered_with_a_kernel_and_a_lowering():
    import modelgraph.saving.onnx.mappings  # noqa: F401 - attaches the lowerings

    names = {*declared.ELEMENTWISE, *declared.ALONG_LAST_AXIS, *(n for n, _ in declared.BY_VERSION)}
    assert set(catalogue.builtin_activations()) == names
    for name in names:
        for spec in _builtin(name):
            assert callable(spec.kernel) and callable(spec.onnx), (name, spec)
    assert {f.name for f in catalogue.functions() if not f.elementwise} == set(declared.ALONG_LAST_AXIS)


def test_hard_sigmoid_has_one_entry_per_meaning():
    by_version = {spec.keras_versions: spec for spec in _builtin("hard_sigmoid")}
    assert set(by_version) == {("1", "2"), ("3",)}
    for major, version in ((1, "1"), (2, "2"), (3, "3")):
        assert version in catalogue.function_spec("activation", "hard_sigmoid", major).keras_versions
    np.testing.assert_allclose(get_activation("hard_sigmoid", K2)(X), np.clip(0.2 * X + 0.5, 0, 1), atol=1e-7)
    np.testing.assert_allclose(get_activation("hard_sigmoid", K3)(X), np.clip(X + 3, 0, 6) / 6, atol=1e-7)


def test_a_builtin_needs_replace_and_then_serves_both_readers(scratch):
    with pytest.raises(CatalogueError, match="activation 'hard_sigmoid' is built into modelgraph"):
        catalogue.register_activation("hard_sigmoid", kernel=np.abs, keras_versions=("3",))
    catalogue.register_activation(
        "hard_sigmoid", kernel=np.abs, onnx=lambda e, x: e.op("Abs", [x]), keras_versions=("3",), replace=True
    )
    assert get_activation("hard_sigmoid", K3) is np.abs
    # the Keras 2 meaning is another entry, untouched
    np.testing.assert_allclose(get_activation("hard_sigmoid", K2)(X), np.clip(0.2 * X + 0.5, 0, 1), atol=1e-7)


def test_a_plugin_may_register_a_name_for_some_versions_only(scratch):
    catalogue.register_activation("twice", kernel=lambda x: 2 * x, keras_versions=("3",))
    assert get_activation("twice", K3)(X).tolist() == (2 * X).tolist()
    with pytest.raises(UnsupportedConfigError):
        get_activation("twice", K2)
    with pytest.raises(CatalogueError, match="keras_versions"):
        catalogue.register_activation("odd", kernel=np.abs, keras_versions=("4",))


def test_a_function_from_the_users_module_is_not_taken_for_a_builtin():
    mine = {"module": "my_layers", "class_name": "function", "config": "relu", "registered_name": "function"}
    assert activation_name(mine) is None
    keras = {
        "module": "keras.activations",
        "class_name": "function",
        "config": "relu",
        "registered_name": None,
    }
    assert activation_name(keras) == "relu"
    assert catalogue.function_spec("activation", "mine>relu") is None  # a package prefix never names one


onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def _exported(name: str, version: tuple[int, int, int], x: np.ndarray) -> np.ndarray:
    from modelgraph.saving.onnx.export import layer_model

    spec = KernelSpec(name="act", class_name="Activation", config={"name": "act", "activation": name},
                      keras_version=version)  # fmt: skip
    model = layer_model("Activation", spec, (x,), out_shapes=[x.shape])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"in_0": x})[0]


@pytest.mark.parametrize("name", sorted({*declared.ELEMENTWISE, *declared.ALONG_LAST_AXIS, "hard_sigmoid"}))
@pytest.mark.parametrize("version", [K2, K3], ids=["keras2", "keras3"])
def test_the_lowering_computes_what_the_kernel_does(name, version):
    x = np.tile(X, (3, 1)) * np.array([[1.0], [0.5], [-1.5]], np.float32)
    want = get_activation(name, version)(x)
    got = _exported(name, version, x)
    np.testing.assert_allclose(got, want, atol=2e-6, rtol=1e-5)


def test_a_plugins_replacement_is_exported_too(scratch):
    catalogue.register_activation("relu", kernel=np.abs, onnx=lambda e, x: e.op("Abs", [x]), replace=True)
    np.testing.assert_array_equal(_exported("relu", K3, X), np.abs(X))
