"""Recurrent layers and their wrappers (Bidirectional, TimeDistributed)."""

from typing import Any

from modelgraph import weight_names as wn
from modelgraph.catalogue import upgrades
from modelgraph.catalogue.spec import (
    NEEDS_SHAPES,
    NO_KERNEL,
    NO_SHAPE_RULE,
    NO_WEIGHT_SHAPES,
    ConfigSpec,
    Masks,
    layer,
    layers,
)

#: Keras 3 defaults of the keys every recurrent layer reads.
RNN_DEFAULTS = {
    "activation": "tanh",
    "use_bias": True,
    "dropout": 0.0,
    "recurrent_dropout": 0.0,
    "return_sequences": False,
    "return_state": False,
    "go_backwards": False,
    "stateful": False,
    "unroll": False,
}
SIMPLE_RNN_CONFIG = ConfigSpec(RNN_DEFAULTS, upgrades.recurrent)
LSTM_CONFIG = ConfigSpec(
    {**RNN_DEFAULTS, "recurrent_activation": "sigmoid", "unit_forget_bias": True}, upgrades.recurrent
)
GRU_CONFIG = ConfigSpec(
    {**RNN_DEFAULTS, "recurrent_activation": "sigmoid", "reset_after": True}, upgrades.gru
)
CONV_LSTM_CONFIG = ConfigSpec(upgrade=upgrades.recurrent)

#: tf.keras recurrent layers take the mask and keep it only with return_sequences.
RNN_MASK = Masks(produces="rnn", consumes="first")
#: The fields every recurrent layer (SimpleRNN, LSTM, GRU, ConvLSTM*) shares.
_RECURRENT: dict[str, Any] = {"weight_names": wn.recurrent, "keras3_weights": wn.in_cell, "masks": RNN_MASK}

SPECS = (
    *layers(("ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D"), config=CONV_LSTM_CONFIG, **_RECURRENT),
    *layers(("CuDNNGRU", "CuDNNLSTM"), keras_versions=("2",), kernel=NO_KERNEL, masks=RNN_MASK),
    *layers(("UnifiedGRU", "UnifiedLSTM"), keras_versions=("2",), kernel=NO_KERNEL),
    layer(
        "Bidirectional",
        weight_names=wn.wrapped,
        keras3_weights=wn.bidirectional_layers,
        masks=Masks(produces="bidirectional", consumes="first"),
    ),
    layer("GRU", config=GRU_CONFIG, **_RECURRENT),
    layer("LSTM", config=LSTM_CONFIG, **_RECURRENT),
    layer(
        "RNN",
        shape=NO_SHAPE_RULE,
        kernel=NO_KERNEL,
        macs=NEEDS_SHAPES,
        weight_shapes=NO_WEIGHT_SHAPES,
        masks=RNN_MASK,
    ),
    layer("SimpleRNN", config=SIMPLE_RNN_CONFIG, **_RECURRENT),
    layer(
        "TimeDistributed",
        weight_names=wn.wrapped,
        keras3_weights=wn.wrapped_layer,
        masks=Masks(produces="time_distributed", consumes="first"),
    ),
)
