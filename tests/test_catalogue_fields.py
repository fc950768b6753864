"""The descriptor fields that replaced class-name tables outside the catalogue: each consumer reads
the entry, so a class registered through the public API (as a plugin would) gets the behaviour,
and the built-in entries carry what the old tables said."""

from __future__ import annotations

import numpy as np
import pytest

from modelgraph import catalogue
from modelgraph.catalogue.keras3 import keras3_only
from modelgraph.catalogue.spec import Keras3Rules, LayerSpec, LegacyH5Rules, Recurrence
from modelgraph.catalogue.writing import NotConvertible
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
