"""The plan and the interpreter on small hand-built graphs: liveness, shared layers, nested models,
training flags, implicit masks, dtype policies, errors."""

from __future__ import annotations

import numpy as np
import pytest

from modelgraph.errors import KernelError, UnsupportedConfigError, UnsupportedLayerError, UsageError
from modelgraph.graph import Layer, ModelGraph, Node, TensorRef, Weight
from modelgraph.runner import dtypes as dt
from modelgraph.runner.interpreter import Runner, parse_tap_key, unsupported


def W(name: str, value) -> Weight:
    arr = np.asarray(value, dtype=np.float32)
    return Weight(name, arr.shape, str(arr.dtype), name, lambda arr=arr: arr.copy())


def inp(name: str, shape=(None, 3), dtype="float32") -> Layer:
    return Layer(
        name, "InputLayer", "input", {"name": name, "batch_shape": list(shape), "dtype": dtype}, node_count=1
    )


def dense(name: str, k, b=None, nodes=1, **cfg) -> Layer:
    k = np.asarray(k, np.float32)
    weights = (W("kernel", k),) + ((W("bias", b),) if b is not None else ())
    config = {"name": name, "units": k.shape[1], "use_bias": b is not None, "activation": "linear", **cfg}
    return Layer(name, "Dense", "layer", config, weights=weights, node_count=nodes)


def node(layer: str, index: int, *args, **kwargs) -> Node:
    flat = [a for a in args if isinstance(a, TensorRef)]
    for a in args:
        if isinstance(a, list):
            flat += [x for x in a if isinstance(x, TensorRef)]
    flat += [v for _, v in sorted(kwargs.items()) if isinstance(v, TensorRef)]
    return Node(layer, index, tuple(args), kwargs, tuple(flat))


def R(layer: str, n: int = 0, t: int = 0) -> TensorRef:
    return TensorRef(layer, n, t)


def graph(layers, nodes, inputs, outputs, version="3.15.1", name="m") -> ModelGraph:
    return ModelGraph(
        name, "Functional", tuple(layers), tuple(nodes), tuple(inputs), tuple(outputs), keras_version=version
    )


K = np.arange(9, dtype=np.float32).reshape(3, 3) / 10


def shared_graph():
    layers = [
        inp("a"),
        inp("b"),
        dense("d", K, np.ones(3), nodes=2),
        Layer("add", "Add", "layer", {"name": "add"}),
    ]
    nodes = [
        node("a", 0),
        node("b", 0),
        node("d", 0, R("a")),
        node("d", 1, R("b")),
        node("add", 0, [R("d", 0), R("d", 1)]),
    ]
    return graph(layers, nodes, [R("a"), R("b")], [R("add"), R("d", 1)])


def test_layer_keys():
    assert Layer("x", "Add", "op", {}).key == "op:Add"
    assert Layer("x", "TFOpLambda", "layer", {"function": "math.multiply"}).key == "tf:math.multiply"
    assert Layer("x", "Dense", "layer", {}).key == "Dense"
    assert Layer("x", "Convolution2D", "layer", {}).key == "Conv2D"  # a Keras 1 alias


def test_shared_layer_one_kernel_and_outputs():
    g = shared_graph()
    r = Runner(g)
    a = np.ones((2, 3), np.float32)
    b = np.full((2, 3), 2, np.float32)
    out = r.run({"a": a, "b": b})
    assert list(out) == ["add", "d"]
    np.testing.assert_allclose(out["d"], b @ K + 1, rtol=1e-6)
    np.testing.assert_allclose(out["add"], a @ K + 1 + b @ K + 1, rtol=1e-6)
    steps = [s for s in r.steps if s.path == "d"]
    assert len(steps) == 2 and steps[0].fn is steps[1].fn


def test_liveness_frees_dead_values():
    r = Runner(shared_graph())
    freed = {s for step in r.steps for s in step.free}
    # everything except the model outputs is freed somewhere
    assert set(range(r._nslots)) - freed == set(r.output_slots)


def test_taps_and_all_intermediates_keys():
    r = Runner(shared_graph())
    feeds = [np.ones((1, 3), np.float32), np.ones((1, 3), np.float32)]
    out = r.run(feeds, taps=["d"])
    assert {"tap/d:0", "tap/d:1"} <= set(out)
    out = r.run(feeds, all_intermediates=True)
    assert {"tap/d:0", "tap/d:1", "tap/add"} <= set(out)
    with pytest.raises(UsageError, match="unknown layer 'nope'"):
        r.run(feeds, taps=["nope"])
    # All intermediates are kept anyway, but a misspelt tap is still an error, not silently ignored.
    with pytest.raises(UsageError, match="unknown layer 'nope'"):
        r.run(feeds, taps=["d", "nope"], all_intermediates=True)
    assert set(r.run(feeds, taps=["d"], all_intermediates=True)) == set(out)
    assert parse_tap_key("tap/inner:1/d:2:1") == ("inner:1/d", 2, 1)


def test_feed_errors_name_the_inputs():
    r = Runner(shared_graph())
    x = np.ones((1, 3), np.float32)
    with pytest.raises(UsageError, match=r"unknown input 'img'; model inputs are \['a', 'b'\]"):
        r.run({"a": x, "b": x, "img": x})
    with pytest.raises(UsageError, match="missing input 'b'"):
        r.run({"a": x})
    with pytest.raises(UsageError, match="expects shape"):
        r.run({"a": np.ones((1, 4), np.float32), "b": x})


def test_batched_run_matches_whole():
    r = Runner(shared_graph())
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((7, 3)).astype(np.float32), rng.standard_normal((7, 3)).astype(np.float32)
    whole = r.run({"a": a, "b": b})
    seen = []
    parts = r.run({"a": a, "b": b}, batch_size=3, progress=lambda d, t: seen.append((d, t)))
    for k in whole:
        np.testing.assert_array_equal(whole[k], parts[k])
    assert seen[-1] == (7, 7) and len(seen) == 3


def nested_graph(training=None):
    inner = graph(
        [inp("ii"), dense("idense", K), Layer("ibn", "Dropout", "layer", {"name": "ibn", "rate": 0.5})],
        [node("ii", 0), node("idense", 0, R("ii")), node("ibn", 0, R("idense"))],
        [R("ii")],
        [R("ibn")],
        name="inner",
    )
    kw = {} if training is None else {"training": training}
    layers = [
        inp("a"),
        Layer("inner", "Functional", "model", {"name": "inner"}, subgraph=inner, node_count=2),
    ]
    nodes = [node("a", 0), node("inner", 0, R("a"), **kw), node("inner", 1, R("inner", 0))]
    return graph(layers, nodes, [R("a")], [R("inner", 1)])


def test_nested_model_called_twice_reuses_kernels():
    r = Runner(nested_graph())
    x = np.ones((2, 3), np.float32)
    out = r.run(x, all_intermediates=True)
    np.testing.assert_allclose(out["inner"], x @ K @ K, rtol=1e-6)
    dense_steps = [s for s in r.steps if s.plain_path == "inner/idense"]
    assert [s.path for s in dense_steps] == ["inner:0/idense", "inner:1/idense"]
    assert dense_steps[0].fn is dense_steps[1].fn
    assert "tap/inner:0" in out and "tap/inner:1/idense" in out


def test_training_true_is_refused_on_training_sensitive_kernels():
    with pytest.raises(UnsupportedConfigError, match="training=True"):
        Runner(nested_graph(training=True))
    Runner(nested_graph(training=False))  # dropped


def test_check_lists_every_problem():
    layers = [
        inp("a"),
        Layer("x1", "NoSuchLayer", "layer", {"name": "x1"}),
        Layer("x2", "Nope2", "layer", {"name": "x2"}),
    ]
    nodes = [node("a", 0), node("x1", 0, R("a")), node("x2", 0, R("x1"))]
    g = graph(layers, nodes, [R("a")], [R("x2")])
    problems = unsupported(g)
    assert [p.path for p in problems] == ["x1", "x2"]
    assert all(isinstance(p.error, UnsupportedLayerError) for p in problems)
    with pytest.raises(UnsupportedLayerError):
        Runner(g)


def test_kernel_failure_names_node_and_shapes():
    g = graph(
        [inp("a", (None, None)), dense("d", K)], [node("a", 0), node("d", 0, R("a"))], [R("a")], [R("d")]
    )
    with pytest.raises(KernelError, match=r"d\[0\].*\(2, 5\)") as info:
        Runner(g).run(np.ones((2, 5), np.float32))
    assert info.value.__cause__ is not None


def test_implicit_mask_reaches_the_consumer():
    emb = Layer(
        "emb",
        "Embedding",
        "layer",
        {"name": "emb", "input_dim": 5, "output_dim": 2, "mask_zero": True},
        weights=(W("embeddings", np.arange(10).reshape(5, 2) / 10),),
    )
    pool = Layer("pool", "GlobalAveragePooling1D", "layer", {"name": "pool"})
    layers = [inp("t", (None, 4), "int32"), emb, pool]
    nodes = [node("t", 0), node("emb", 0, R("t")), node("pool", 0, R("emb"))]
    tok = np.array([[1, 2, 0, 0]])
    k2 = graph(layers, nodes, [R("t")], [R("pool")], version="2.15.0")
    k3 = graph(layers, nodes, [R("t")], [R("pool")], version="3.15.1")
    e = np.arange(10).reshape(5, 2) / 10
    np.testing.assert_allclose(Runner(k2).run(tok)["pool"], (e[1] + e[2])[None] / 2, rtol=1e-6)
    # Keras 3 attaches the mask at run time too (a config without the mask kwarg still applies it).
    np.testing.assert_allclose(Runner(k3).run(tok)["pool"], (e[1] + e[2])[None] / 2, rtol=1e-6)


def test_dtype_policies():
    assert (
        dt.resolve_policy({"class_name": "DTypePolicy", "config": {"name": "mixed_float16"}}).compute_dtype
        == "float16"
    )
    assert (
        dt.resolve_policy({"class_name": "Policy", "config": {"name": "mixed_bfloat16"}}).compute_dtype
        == "bfloat16"
    )
    assert dt.resolve_policy("float32").is_default
    int4 = dt.resolve_policy({"class_name": "Int4DTypePolicy", "config": {"mode": "int4/128"}})
    assert (int4.quantization, int4.compute_dtype, int4.name) == ("int4", "float32", "int4/128_from_float32")
    for policy in (
        {"class_name": "QuantizedFloat8DTypePolicy", "config": {"mode": "float8", "source_name": "float32"}},
        {"class_name": "Int4DTypePolicy", "config": {"mode": "int4/x"}},
        {"class_name": "QuantizedDTypePolicy", "config": {"mode": "int8", "source_name": "bfloat16"}},
    ):
        with pytest.raises(UnsupportedConfigError):
            dt.resolve_policy(policy)
    x = np.array([1.0, 1.00390625, 1.01171875, -3.3, np.inf, np.nan], np.float32)
    r = dt.round_bfloat16(x)
    assert r[0] == 1.0 and r[1] == 1.0 and r[2] == 1.015625  # ties to even
    assert np.isinf(r[4]) and np.isnan(r[5])


def test_mixed_float16_layer_computes_in_half():
    d = dense("d", K, np.ones(3), dtype={"class_name": "DTypePolicy", "config": {"name": "mixed_float16"}})
    g = graph([inp("a"), d], [node("a", 0), node("d", 0, R("a"))], [R("a")], [R("d")])
    out = Runner(g).run(np.full((1, 3), 1 / 3, np.float32))["d"]
    assert out.dtype == np.float16
