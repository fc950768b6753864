"""The descriptor fields that replaced class-name tables outside the catalogue: each consumer reads
the entry, so a class registered through the public API (as a plugin would) gets the behaviour,
and the built-in entries carry what the old tables said."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from modelgraph import catalogue
from modelgraph.catalogue.keras3 import keras3_only
from modelgraph.catalogue.spec import Fusion, Keras3Rules, LayerSpec, LegacyH5Rules, Recurrence
from modelgraph.catalogue.writing import NotConvertible
from modelgraph.graph import TensorRef
from modelgraph.loading import load
from modelgraph.saving.hard_sigmoid import weight_scales
from modelgraph.saving.legacy_h5_ops import op_as_layer
from modelgraph.saving.tf_ops import convert_tf_op
from modelgraph.saving.upgrades import UpgradeContext, keras3_class_name, upgrade_call, upgrade_layer
from modelgraph.shape_rules._base import extra_batch_axes
from modelgraph.shape_rules.recurrent import rnn_outputs, rnn_weights
from modelgraph.weight_names import canonical_from_path, own_weight_names


@pytest.fixture
def scratch():
    with catalogue.scratch():
        yield


def test_recurrence_gives_the_rnn_rules_their_gates_states_and_bias(scratch) -> None:
    catalogue.register(LayerSpec("PeepholeLSTM", recurrence=Recurrence(gates=4, states=2, bias="cudnn")))
    weights = rnn_weights("PeepholeLSTM", {"units": 3}, 5)
    assert weights == {"kernel": (5, 12), "recurrent_kernel": (3, 12), "bias": (24,)}
    outs = rnn_outputs("PeepholeLSTM", {"units": 3, "return_state": True}, (None, 7, 5))
    assert outs == [(None, 3), (None, 3), (None, 3)]


def test_builtin_recurrences() -> None:
    steps = {s.key: s.recurrence for s in catalogue.declared() if s.recurrence is not None}
    assert {k: (r.gates, r.states) for k, r in steps.items() if not r.convolutional} == {
        "SimpleRNN": (1, 1), "LSTM": (4, 2), "GRU": (3, 1), "CuDNNLSTM": (4, 2), "CuDNNGRU": (3, 1),
        "UnifiedLSTM": (4, 2), "UnifiedGRU": (3, 1),
    }  # fmt: skip
    assert rnn_weights("GRU", {"units": 2, "reset_after": True}, 4)["bias"] == (2, 6)
    assert rnn_weights("UnifiedGRU", {"units": 2, "reset_after": False}, 4)["bias"] == (6,)


def test_leading_batch_rank(scratch) -> None:
    assert extra_batch_axes("Conv1D", 5) == 2
    assert extra_batch_axes("Convolution2D", 5) == 1  # through the alias
    assert extra_batch_axes("Dense", 5) == 0
    catalogue.register(LayerSpec("MyConv", leading_batch_rank=4))
    assert extra_batch_axes("MyConv", 6) == 2


def test_linear_weights_decide_the_hard_sigmoid_rescaling(scratch) -> None:
    catalogue.register(LayerSpec("MyDense", linear_weights=("kernel",)))
    scales = weight_scales("MyDense", {"activation": "hard_sigmoid"})
    assert set(scales) == {"kernel"}
    np.testing.assert_array_equal(scales["kernel"](np.ones(2, np.float32)), np.full(2, 1.2, np.float32))
    assert weight_scales("LayerNormalization", {"activation": "hard_sigmoid"}) is None  # weights, none linear


def test_linear_weights_are_canonical_weight_names() -> None:
    """Every entry's ``linear_weights`` name weights the class has (canonical names, every optional
    weight present): a name that is not one scales nothing, and a Keras 1/2 ``hard_sigmoid`` on that
    layer is written unscaled (DepthwiseConv1D/2D named ``depthwise_kernel``, tf.keras's spelling:
    fuzz case tf_keras seed 1068, Keras 3 off by 0.009)."""
    wrong = {}
    for spec in catalogue.declared():
        if not spec.linear_weights:
            continue
        names = own_weight_names(spec.key, {"use_bias": True, "center": True, "scale": True, "units": 2})
        if names is None or not set(spec.linear_weights) <= set(names):
            wrong[spec.key] = (spec.linear_weights, names)
    assert not wrong
    scales = weight_scales("DepthwiseConv1D", {"activation": "hard_sigmoid", "use_bias": False})
    assert set(scales) == {"kernel", "bias"}


def test_keras3_rules_replace_refuse_and_upgrade(scratch) -> None:
    ctx = UpgradeContext("2.15.0")
    assert keras3_class_name("ThresholdedReLU") == "ReLU"
    name, config = upgrade_layer("ThresholdedReLU", {"name": "t", "theta": 0.5}, ctx)
    assert (name, config["threshold"], "theta" in config) == ("ReLU", 0.5, False)
    with pytest.raises(NotConvertible, match="groups=2"):
        upgrade_layer("DepthwiseConv2D", {"name": "d", "groups": 2}, ctx)
    # An entry's hook runs for a class Keras 3 has (replacing the built-in Dense entry here).
    seen = []
    catalogue.register(
        LayerSpec("Dense", keras3_rules=Keras3Rules(lambda c, _ctx: seen.append(c) or {**c, "x": 1})),
        replace=True,
    )
    assert upgrade_layer("Dense", {"name": "d", "units": 2}, ctx)[1]["x"] == 1 and seen


def test_folded_initial_state_follows_the_entry() -> None:
    args, kwargs = upgrade_call("LSTM", (["x", "h", "c"],), {})
    assert args == ("x",) and kwargs == {"initial_state": ["h", "c"]}
    assert upgrade_call("Dense", (["x", "h"],), {}) == ((["x", "h"],), {})


def test_keras3_only() -> None:
    assert keras3_only("RMSNormalization") and keras3_only("AugMix")  # catalogued / not
    assert not keras3_only("Dense") and not keras3_only("MaxPool2D")
    only = {s.key for s in catalogue.declared() if keras3_only(s.key)}
    assert only == {"AutoContrast", "Equalization", "RMSNormalization", "RandomGrayscale", "Solarization"}


def test_legacy_weight_path_and_directions(scratch) -> None:
    assert canonical_from_path("MultiHeadAttention", "mha", "mha/query/kernel:0") == "query/kernel"
    assert canonical_from_path("Bidirectional", "bi", "bi/backward_lstm/kernel:0") == "backward/kernel"
    catalogue.register(LayerSpec("Twin", directions=("left", "right")))
    assert canonical_from_path("Twin", "tw", "tw/right_cell/bias:0") == "right/bias"
    catalogue.register(LayerSpec("Nested", legacy_weight_path=lambda segs, last, cfg: f"inner/{last}"))
    assert canonical_from_path("Nested", "n", "n/a/b/w:0") == "inner/w"


def test_legacy_h5_op_forms_follow_the_op_entries(scratch) -> None:
    def tensor(name: str) -> dict:
        return {
            "class_name": "__keras_tensor__",
            "config": {"shape": [None, 2], "dtype": "float32"},
            "n": name,
        }

    entry = {
        "name": "s",
        "class_name": "Subtract",
        "inbound_nodes": [{"args": [3.0, tensor("a")], "kwargs": {}}],
    }
    class_name, config, _ = op_as_layer(entry)
    assert (class_name, config["scale"], config["offset"]) == ("Rescaling", -1.0, 3.0)
    divide = {**entry, "class_name": "Divide"}
    assert isinstance(op_as_layer(divide), str)  # no form: refused
    catalogue.register(
        LayerSpec("op:Divide", legacy_h5=LegacyH5Rules(rescaling=lambda n, first: (1 / n, 0.0))), replace=True
    )
    assert (
        op_as_layer({**divide, "inbound_nodes": [{"args": [tensor("a"), 4.0], "kwargs": {}}]})[1]["scale"]
        == 0.25
    )


def test_tf_op_converters_are_attached_to_the_tf_entries() -> None:
    converted = [s.key for s in catalogue.declared() if s.key.startswith("tf:") and callable(s.keras3_op)]
    assert len(converted) == 78
    assert convert_tf_op("math.reduce_min", ("x",), {}).config == {
        "axis": None,
        "keepdims": False,
        "initial": None,
    }
    assert "initial" not in convert_tf_op("math.reduce_sum", ("x",), {}).config
    with pytest.raises(NotConvertible):
        convert_tf_op("math.cumprod", ("x",), {})


@pytest.mark.parametrize(
    ("field", "value"),
    [("recurrence", 3), ("keras3_rules", "ReLU"), ("linear_weights", "kernel"), ("leading_batch_rank", 0),
     ("keras1_kernel", 1), ("legacy_weight_path", "query")],
)  # fmt: skip
def test_a_bad_field_is_refused_naming_it(scratch, field: str, value: object) -> None:
    with pytest.raises(catalogue.CatalogueError, match=f"entry 'Zed': {field} must be"):
        catalogue.register(LayerSpec("Zed", **{field: value}))


def test_keras3_weight_upgrades(scratch) -> None:
    from modelgraph.graph import Weight
    from modelgraph.saving.keras3_weights import stored_array

    scale = Weight("scale", (1,), "float32", "test", lambda: np.array([0.5], np.float32))
    assert stored_array(scale, "Attention")[0].shape == ()
    assert stored_array(scale, "Dense")[0].shape == (1,)
    catalogue.register(LayerSpec("Halver", keras3_weight_upgrades={"scale": lambda a: a / 2}))
    assert stored_array(scale, "Halver")[0].tolist() == [0.25]


def test_builtin_fusion_roles() -> None:
    """The entries carry what the fusion passes' class lists said (runner/passes, fast/fused.py)."""
    import modelgraph.runner.fast.fused  # noqa: F401  (attaches the padded kernels)

    specs = [s for s in catalogue.declared() if s.fusion is not None]
    roles = {s.key: s.fusion for s in specs}
    assert {k: f.channel_axis for k, f in roles.items() if f.channel_axis is not None} == {
        "Conv1D": 2, "Conv2D": 3, "Conv3D": 4, "DepthwiseConv1D": 2, "DepthwiseConv2D": 3,
        "SeparableConv1D": 2, "SeparableConv2D": 3, "Dense": 1,
    }  # fmt: skip
    assert {k for k, f in roles.items() if f.depthwise} == {"DepthwiseConv1D", "DepthwiseConv2D"}
    assert {k for k, f in roles.items() if f.batchnorm} == {"BatchNormalization"}
    assert {k: f.bottleneck for k, f in roles.items() if f.bottleneck} == {
        "Conv2D": "pointwise",
        "DepthwiseConv2D": "depthwise",
    }
    assert {k for k, f in roles.items() if f.residual} == {"Conv2D"}
    assert {k for k, f in roles.items() if f.sums} == {"Add"}
    assert {k for k, f in roles.items() if f.multiplies} == {"Multiply"}
    poolings = ("MaxPooling", "AveragePooling", "GlobalMaxPooling", "GlobalAveragePooling")
    assert {k for k, f in roles.items() if f.shareable} == {f"{p}{n}D" for p in poolings for n in (1, 2, 3)}
    assert {k for k, f in roles.items() if f.separable} == {"SeparableConv2D"}
    assert {k for k, f in roles.items() if f.activation} == {"Activation", "ReLU"}
    assert {k for k, f in roles.items() if f.zero_padding} == {"ZeroPadding2D"}
    padded = {k for k, f in roles.items() if f.takes_zero_padding}
    assert padded == {"Conv2D", "DepthwiseConv2D", "MaxPooling2D", "AveragePooling2D"}
    assert {s.key for s in catalogue.declared() if s.padded_kernel is not None} == padded
    assert {
        s.key: s.input_quantizer_axis for s in catalogue.declared() if s.input_quantizer_axis is not None
    } == {"Dense": -1}


@pytest.mark.parametrize(
    ("config", "expected"),
    [({}, "relu"), ({"max_value": 6}, "relu6"), ({"max_value": 6.0, "negative_slope": 0.0}, "relu6"),
     ({"max_value": 5}, None), ({"max_value": True}, None), ({"negative_slope": 0.1}, None),
     ({"threshold": 0.5}, None), ({"alpha": 0.2}, None), ({"max_value": "6"}, None)],
)  # fmt: skip
def test_relu_amounts_to_relu_or_relu6(config: dict, expected: str | None) -> None:
    assert catalogue.spec_for("ReLU").fusion.activation(config) == expected


def test_fusion_pads_and_pools() -> None:
    pads = catalogue.spec_for("ZeroPadding2D").fusion.zero_padding
    assert pads({}) == [[1, 1], [1, 1]]
    assert pads({"padding": [2, 3]}) == [[2, 2], [3, 3]]
    assert pads({"padding": [[1, 0], [0, 2]]}) == [[1, 0], [0, 2]]
    assert pads({"padding": -1}) is None and pads({"padding": "x"}) is None
    takes = catalogue.spec_for("MaxPooling2D").fusion.takes_zero_padding
    assert takes({"pool_size": [3, 3]}, [[1, 1], [1, 1]])
    assert not takes({"pool_size": 2}, [[2, 0], [0, 0]])  # a window of padding alone
    assert not takes({"pool_size": 3, "padding": "same"}, [[1, 1], [1, 1]])
    conv = catalogue.spec_for("Conv2D").fusion.takes_zero_padding
    assert conv({"groups": 1}, [[1, 1], [1, 1]]) and not conv({"groups": 2}, [[1, 1], [1, 1]])


@pytest.mark.parametrize(
    ("value", "field"),
    [(Fusion(channel_axis=0), "fusion.channel_axis"), (Fusion(bottleneck="1x1"), "fusion.bottleneck"),  # type: ignore[arg-type]
     (Fusion(sums=1), "fusion.sums"), (Fusion(multiplies=None), "fusion.multiplies"),  # type: ignore[arg-type]
     (Fusion(separable="yes"), "fusion.separable"), (Fusion(activation="relu"), "fusion.activation"),  # type: ignore[arg-type]
     (3, "fusion")],
)  # fmt: skip
def test_a_bad_fusion_is_refused_naming_it(scratch, value: object, field: str) -> None:
    with pytest.raises(catalogue.CatalogueError, match=f"entry 'Zed': {field} must be"):
        catalogue.register(LayerSpec("Zed", fusion=value))  # type: ignore[arg-type]


def _with_class(graph, layer_name: str, class_name: str):
    """``graph`` with one layer's class renamed (its key follows)."""
    from dataclasses import replace

    layers = tuple(
        replace(lyr, class_name=class_name) if lyr.name == layer_name else lyr for lyr in graph.layers
    )
    return replace(graph, layers=layers)


@pytest.mark.parametrize("opts_in", [True, False])
def test_a_plugin_conv_opts_into_batchnorm_folding(scratch, opts_in: bool) -> None:
    """A plugin's Conv2D-like class (the built-in reference kernel, no fast kernel) absorbs the
    BatchNormalization and ReLU after it when its entry says so, and only then; the fused plan
    equals the unfused one (reference kernels all the way) on a Keras-made CNN."""
    from pathlib import Path

    from modelgraph.loading import load
    from modelgraph.runner.fusion import fuse
    from modelgraph.runner.interpreter import Runner

    conv = catalogue.spec_for("Conv2D", *catalogue.PROVIDERS)
    with catalogue.plugin_scope("fusing"):
        catalogue.register(
            LayerSpec(
                "PluginConv2D",
                shape=conv.shape,
                weight_names=conv.weight_names,
                weight_shapes=conv.weight_shapes,
                kernel=conv.kernel,
                fusion=Fusion(channel_axis=3) if opts_in else None,
            )
        )
    samples = Path(__file__).resolve().parent.parent / "samples"
    graph = _with_class(load(samples / "k3" / "cnn.keras"), "conv1", "PluginConv2D")
    fused = fuse(graph)
    names = {lyr.name for lyr in fused.layers}
    assert ("bn1" in names, "relu1" in names) == ((False, False) if opts_in else (True, True))
    if opts_in:
        folded = fused.layer("conv1")
        assert (folded.class_name, folded.config["activation"], folded.config["use_bias"]) == (
            "PluginConv2D",
            "relu",
            True,
        )
    x = np.random.default_rng(3).uniform(-1, 1, (2, *graph.layer("img").config["batch_shape"][1:]))
    x = x.astype(np.float32)
    got = Runner(graph).run(x)
    want = Runner(graph, fuse=False).run(x)
    for key, value in want.items():
        np.testing.assert_allclose(got[key], value, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("opts_in", [True, False])
@pytest.mark.parametrize(
    ("builtin", "role", "sample", "merged_into"),
    [
        # MobileNetV3's squeeze-and-excitation products, each read by a block's 1x1 projection.
        ("Multiply", Fusion(multiplies=True), "k3/app_mobilenetv3small.keras", "modelgraph/ScaledConv"),
        # ZeroPadding2D -> SeparableConv2D -> BatchNormalization.
        ("SeparableConv2D", Fusion(channel_axis=3, separable=True), "savedmodel/separable_up.h5",
         "modelgraph/PreparedSeparable"),
    ],
)  # fmt: skip
def test_a_plugin_class_opts_into_a_merged_step(scratch, builtin, role, sample, merged_into, opts_in) -> None:
    """A plugin's class computing what ``builtin`` does (its reference kernel) becomes part of the
    merged step the built-in class would when its entry gives it that fusion role, and only then;
    the fused plan equals the unfused one on a Keras-made model."""
    from modelgraph.runner.fusion import fuse
    from modelgraph.runner.interpreter import Runner

    own = catalogue.spec_for(builtin, *catalogue.PROVIDERS)
    plugin_role = role if opts_in else dataclasses.replace(role, multiplies=False, separable=False)
    with catalogue.plugin_scope("fusing"):
        catalogue.register(
            LayerSpec(
                f"Plugin{builtin}",
                shape=own.shape,
                weight_names=own.weight_names,
                weight_shapes=own.weight_shapes,
                kernel=own.kernel,
                fusion=plugin_role,
            )
        )
    graph = load(SAMPLES / sample)
    fused_builtin = fuse(graph)
    for lyr in graph.layers:
        if lyr.class_name == builtin and lyr.kind == "layer":  # not Keras 3's multiply op
            graph = _with_class(graph, lyr.name, f"Plugin{builtin}")
    fused = fuse(graph)
    merged = sorted(lyr.name for lyr in fused.layers if lyr.class_name == merged_into)
    expected = sorted(lyr.name for lyr in fused_builtin.layers if lyr.class_name == merged_into)
    assert expected and merged == (expected if opts_in else [])
    image = graph.layer(graph.inputs[0].layer).config
    shape = (image.get("batch_shape") or image["batch_input_shape"])[1:]  # Keras 3 / tf.keras
    x = np.random.default_rng(5).uniform(-1, 1, (2, *shape)).astype(np.float32)
    got, want = Runner(graph).run(x), Runner(graph, fuse=False).run(x)
    for key, value in want.items():
        np.testing.assert_allclose(got[key], value, rtol=1e-4, atol=1e-5)


# --- fields read by shape inference, run --random and the Keras 3 mask rules -----------------------

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def _replaced(key: str, **fields: object) -> None:
    """Register ``key``'s entry again with ``fields`` changed (inside ``catalogue.scratch()``)."""
    catalogue.register(
        dataclasses.replace(catalogue.spec_for(key, "shape", "kernel"), **fields), replace=True
    )


def test_weight_inputs_give_the_shapes_weights_are_built_from(scratch) -> None:
    """MultiHeadAttention's weights are built from query, value and key (its entry's weight_inputs);
    a class whose entry picks other shapes gets its stored weights checked against those."""
    from modelgraph import plugins
    from modelgraph.shapes import infer_shapes

    implicit = load(SAMPLES / "k3/mask_implicit.keras")  # mha(query (None, 5, 6), value (None, 7, 6))
    stored = {w.name: tuple(w.shape) for w in implicit.layer("mha").weights}
    assert infer_shapes(implicit).expected["mha"] == stored  # as Keras built them
    with plugins.scratch():
        plugins.load_plugin(str(SAMPLES.parent / "examples/plugins/attention_pooling.py"))
        graph = load(SAMPLES / "plugins/custom_text.keras")
        assert not [p for p in infer_shapes(graph).problems if p.kind == "weight_shape"]
        _replaced("AttentionWeightedAverage", weight_inputs=lambda call: [(None, 12, 99)])
        problems = [str(p) for p in infer_shapes(graph).problems if p.kind == "weight_shape"]
    assert len(problems) == 1 and "weight 'W'" in problems[0] and "(99, 1)" in problems[0]


RANDOM_IDS = ["k2/random_ids.h5", "k3/random_ids.keras"]


@pytest.mark.parametrize("name", RANDOM_IDS)
def test_id_range_and_keeps_values_decide_the_random_ids(scratch, name: str) -> None:
    """run --random draws ids for inputs that reach an Embedding (its entry's id_range), also through
    TimeDistributed (wrapped_keys), a nested model and a Reshape (keeps_values)."""
    from modelgraph.runner.feeds import _embedding_limits

    graph = load(SAMPLES / name)
    assert _embedding_limits(graph) == {"ids": 50, "grid": 30, "flat_ids": 7}
    _replaced("Reshape", keeps_values=False)  # flat_ids reaches its Embedding through a Reshape
    assert _embedding_limits(graph) == {"ids": 50, "grid": 30}
    _replaced("Embedding", id_range=lambda config: 3)
    assert _embedding_limits(graph) == {"ids": 3, "grid": 3}


def test_clears_names_the_arguments_whose_masks_a_keras3_call_clears(scratch) -> None:
    from modelgraph.catalogue.spec import K2, K3, masks
    from modelgraph.runner.masks import cleared_masks

    graph = load(SAMPLES / "k3/mask_implicit.keras")
    cleared, position = cleared_masks(graph)
    assert cleared == {
        TensorRef("emb_q", 0, 0): position[("mha", 0)],
        TensorRef("emb_v", 0, 0): position[("mha", 0)],
    }
    spec = catalogue.spec_for("MultiHeadAttention")
    k3 = dataclasses.replace(spec.masks[K3], clears=("value",))
    _replaced("MultiHeadAttention", masks=masks(spec.masks[K2], k3))
    assert cleared_masks(graph)[0] == {TensorRef("emb_v", 0, 0): position[("mha", 0)]}


@pytest.mark.parametrize(
    ("field", "value"), [("weight_inputs", "query"), ("id_range", 50), ("keeps_values", "yes")]
)
def test_the_new_fields_refuse_nonsense(scratch, field: str, value: object) -> None:
    with pytest.raises(catalogue.CatalogueError, match=f"entry 'Zed': {field} must be"):
        catalogue.register(LayerSpec("Zed", **{field: value}))
    from modelgraph.catalogue.spec import MaskBehaviour, masks

    with pytest.raises(catalogue.CatalogueError, match="clears is a tuple"):
        catalogue.register(LayerSpec("Zed", masks=masks(k3=MaskBehaviour("call", "pass", clears="query"))))
