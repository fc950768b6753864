"""convert: the Keras 2 forms Keras 3 has no direct word for, written so Keras 3 computes Keras 2's
numbers (implicit masks made explicit, RNN(cell), time-major RNNs, TimeDistributed over folded axes).

Keras 3 itself verified each whole conversion (``samples/convert/verified.json``, replayed by
tests/test_convert.py); these tests pin what the written config says, on the real sample files.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

import modelgraph
from modelgraph.errors import NotConvertibleError

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"


def _written(source: str, tmp_path: Path) -> dict:
    out = tmp_path / "out.keras"
    modelgraph.save(modelgraph.load(SAMPLES / source), out)
    with zipfile.ZipFile(out) as archive:
        config = json.loads(archive.read("config.json"))
    return {entry["name"]: entry for entry in config["config"]["layers"]} | {"": config}


def _history(value) -> list[str]:
    """The producer names of every tensor in a written call."""
    if isinstance(value, dict):
        if value.get("class_name") == "__keras_tensor__":
            return [value["config"]["keras_history"][0]]
        return [n for k in sorted(value) for n in _history(value[k])]
    if isinstance(value, list):
        return [n for v in value for n in _history(v)]
    return []


def test_merge_masks_are_anded_as_keras2_did_and_multiply_reads_unmasked_copies(tmp_path):
    layers = _written("k2/mask_merge.h5", tmp_path)
    # The GRU after Add gets Keras 2's AND of both Embedding masks, explicitly.
    gru_kwargs = layers["gru_add"]["inbound_nodes"][0]["kwargs"]
    and_op = layers[_history(gru_kwargs["mask"])[0]]
    assert and_op["class_name"] == "LogicalAnd"
    assert _history(and_op["inbound_nodes"][0]["args"]) == ["emb_a_not_equal", "emb_b_not_equal"]
    # Keras 3's Multiply would read its inputs' implicit masks (Keras 2's did not): it reads copies.
    producers = _history(layers["multiply"]["inbound_nodes"][0]["args"])
    assert [layers[p]["class_name"] for p in producers] == ["Copy", "Copy"]
    # ThresholdedReLU is Keras 3's ReLU with a threshold.
    assert layers["pt_thr"]["class_name"] == "ReLU"
    assert layers["pt_thr"]["config"]["threshold"] == pytest.approx(0.05)


def test_multi_head_attention_gets_keras2s_attention_mask(tmp_path):
    layers = _written("k2/kw_order.h5", tmp_path)
    node = layers["mha_q_v_k_mask"]["inbound_nodes"][0]
    mask_op = layers[_history(node["kwargs"]["attention_mask"])[0]]
    assert mask_op["class_name"] == "LogicalAnd"
    # query and value are masked (the key's Embedding is not): their masks, and the given mask cast
    # to bool, all go into the AND; the query itself is an unmasked copy.
    names = set()
    stack = [mask_op]
    while stack:
        entry = stack.pop()
        for name in _history(entry["inbound_nodes"][0]["args"]):
            names.add(name)
            if name in layers and layers[name]["class_name"] in ("LogicalAnd", "ExpandDims", "Cast"):
                stack.append(layers[name])
    assert {"emb_q_not_equal", "emb_v_not_equal", "att_mask"} <= names
    assert "emb_k_not_equal" not in layers
    assert layers[_history(node["args"])[0]]["class_name"] == "Copy"


def test_masked_attention_scores_keep_keras2s_evenly_spread_rows(tmp_path):
    """Keras 3 zeroes a fully masked row of the scores it returns (tf.keras spread it evenly): the
    layer is called again without scores for its output, and the scores are patched with Where."""
    layers = _written("k2/mask_attention.h5", tmp_path)
    first, second = layers["mha_qvk"]["inbound_nodes"]
    assert first["kwargs"]["return_attention_scores"] is True
    assert "return_attention_scores" not in second["kwargs"]
    assert _history(first["kwargs"]["attention_mask"]) == _history(second["kwargs"]["attention_mask"])
    where = layers["mha_qvk_scores"]
    assert where["class_name"] == "Where"
    assert where["inbound_nodes"][0]["args"][1]["config"]["keras_history"] == ["mha_qvk", 0, 1]
    assert where["inbound_nodes"][0]["args"][2] == pytest.approx(1 / 7)
    outputs = layers[""]["config"]["output_layers"]
    assert ["mha_qvk", 1, 0] in outputs and ["mha_qvk_scores", 0, 0] in outputs
    assert ["mha_qvk", 0, 0] not in outputs and ["mha_qvk", 0, 1] not in outputs


def test_mask_rules_keras3_does_differently_stay_refused_for_h5(tmp_path):
    with pytest.raises(NotConvertibleError) as info:
        modelgraph.save(modelgraph.load(SAMPLES / "k2" / "mask_merge.h5"), tmp_path / "out.h5")
    refused = {r.path for r in info.value.refusals}
    assert {"add", "multiply", "cat_time"} <= refused
    assert "only .keras writes it explicitly" in str(info.value)


def test_rnn_cells_are_written_in_keras3_form(tmp_path):
    layers = _written("k2/rnn_cells.h5", tmp_path)
    stacked = layers["rnn_stacked"]["config"]["cell"]
    assert stacked["class_name"] == "StackedRNNCells"
    cells = stacked["config"]["cells"]
    assert [c["class_name"] for c in cells] == ["LSTMCell", "GRUCell"]
    assert cells[0]["config"]["dtype"]["class_name"] == "DTypePolicy"
    assert "time_major" not in layers["rnn_simple"]["config"]
    # The masked RNN(cell) takes the Embedding's mask explicitly.
    kwargs = layers["rnn_masked"]["inbound_nodes"][0]["kwargs"]
    assert _history(kwargs["mask"]) == ["emb_not_equal"]


def test_time_major_rnns_are_transposed_around(tmp_path):
    layers = _written("convert/time_major.h5", tmp_path)
    assert "time_major" not in layers["gru_tm"]["config"]
    assert _history(layers["gru_tm"]["inbound_nodes"][0]["args"]) == ["gru_tm_batch_major"]
    assert layers["gru_tm_batch_major"]["class_name"] == "Transpose"
    assert layers["gru_tm_batch_major"]["config"]["axes"] == [1, 0, 2]
    # The sequence output is transposed back for its reader and for the model output; the state and
    # the LSTM's last output are not.
    assert _history(layers["after_seq"]["inbound_nodes"][0]["args"]) == ["gru_tm_time_major"]
    outputs = layers[""]["config"]["output_layers"]
    assert outputs == [["lstm_tm", 0, 0], ["gru_tm_time_major", 0, 0], ["gru_tm", 0, 1], ["after_seq", 0, 0]]


def test_time_major_stays_refused_for_h5(tmp_path):
    with pytest.raises(NotConvertibleError, match="time_major=True has no Keras 3 equivalent here"):
        modelgraph.save(modelgraph.load(SAMPLES / "convert" / "time_major.h5"), tmp_path / "out.h5")


def test_time_distributed_conv1d_over_folded_axes_is_nested(tmp_path):
    layers = _written("k2/td_conv_rank5.h5", tmp_path)
    outer = layers["td_conv1d"]["config"]
    inner = outer["layer"]
    assert inner["class_name"] == "TimeDistributed"
    assert inner["config"]["layer"]["class_name"] == "Conv1D"
    assert layers["td_conv2d"]["config"]["layer"]["class_name"] == "Conv2D"  # rank 4 fits as is
    with zipfile.ZipFile(tmp_path / "out.keras") as archive:
        (tmp_path / "w.h5").write_bytes(archive.read("model.weights.h5"))
    import h5py

    with h5py.File(tmp_path / "w.h5") as f:
        assert "layers/time_distributed/layer/layer/vars/0" in f


def test_a_keras2_mask_leaving_a_nested_model_is_refused(tmp_path):
    """tf.keras carried a mask made inside a nested model out of it (its compute_mask ran the inner
    graph); the writer does not follow masks across nested models, so it refuses rather than drop it."""

    def layer(cls, name, config, inbound):
        return {"class_name": cls, "name": name, "config": {"name": name, **config}, "inbound_nodes": inbound}

    inner = layer(
        "Functional",
        "inner",
        {
            "layers": [
                layer("InputLayer", "ids", {"batch_input_shape": [None, 5], "dtype": "int32"}, []),
                layer(
                    "Embedding",
                    "emb",
                    {"input_dim": 10, "output_dim": 3, "mask_zero": True},
                    [[["ids", 0, 0, {}]]],
                ),
            ],
            "input_layers": [["ids", 0, 0]],
            "output_layers": [["emb", 0, 0]],
        },
        [[["tokens", 0, 0, {}]]],
    )
    config = {
        "class_name": "Functional",
        "config": {
            "name": "outer",
            "layers": [
                layer("InputLayer", "tokens", {"batch_input_shape": [None, 5], "dtype": "int32"}, []),
                inner,
                layer("LSTM", "lstm", {"units": 2}, [[["inner", 1, 0, {}]]]),
            ],
            "input_layers": [["tokens", 0, 0]],
            "output_layers": [["lstm", 0, 0]],
        },
        "keras_version": "2.15.0",
        "backend": "tensorflow",
    }
    path = tmp_path / "model.json"
    path.write_text(json.dumps(config))
    with pytest.raises(NotConvertibleError, match="made inside the nested model leaves it") as info:
        modelgraph.save(modelgraph.load(path), tmp_path / "out.keras")
    assert "inner" in [r.path for r in info.value.refusals]  # (the JSON has no weights: also named)
