"""Recurrent layers and their wrappers (Bidirectional, TimeDistributed)."""

from typing import Any

from modelgraph import weight_names as wn
from modelgraph.catalogue import upgrades, writing
from modelgraph.catalogue.spec import (
    NO_KERNEL,
    ConfigSpec,
    Keras3Rules,
    LegacyH5Rules,
    MaskBehaviour,
    Recurrence,
    layer,
    layers,
    masks,
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
    "zero_output_for_mask": False,
}
SIMPLE_RNN_CONFIG = ConfigSpec(RNN_DEFAULTS, upgrades.recurrent)
LSTM_CONFIG = ConfigSpec(
    {**RNN_DEFAULTS, "recurrent_activation": "sigmoid", "unit_forget_bias": True}, upgrades.recurrent
)
GRU_CONFIG = ConfigSpec(
    {**RNN_DEFAULTS, "recurrent_activation": "sigmoid", "reset_after": True}, upgrades.gru
)
CONV_LSTM_CONFIG = ConfigSpec(upgrade=upgrades.recurrent)

#: Keras 1 stored an LSTM's and a GRU's weights gate by gate (``W_i``, ``U_i``, ``b_i``, ``W_c``, ...;
#: LSTM in the order i, c, f, o); Keras 2 joins them along the last axis in this order.
KERAS1_GATES = {"LSTM": ("i", "f", "c", "o"), "GRU": ("z", "r", "h")}

#: Which of a recurrent layer's equal column blocks (of its kernel, recurrent kernel and bias) feed
#: its ``recurrent_activation``: LSTM's i, f, o of (i, f, c, o); GRU's z, r of (z, r, h).
RECURRENT_ACTIVATION_GATES: dict[str, tuple[tuple[int, ...], int]] = {
    "LSTM": ((0, 1, 3), 4),
    "ConvLSTM1D": ((0, 1, 3), 4),
    "ConvLSTM2D": ((0, 1, 3), 4),
    "ConvLSTM3D": ((0, 1, 3), 4),
    "GRU": ((0, 1), 3),
}

_RNN_CALL = ("sequences", "initial_state", "mask", "training")
#: Recurrent layers take the mask (it skips steps) and keep it on the sequence output only.
RNN_MASK = masks(MaskBehaviour("first", "rnn"), MaskBehaviour("call", "rnn", _RNN_CALL))
#: The fields every recurrent layer (SimpleRNN, LSTM, GRU, ConvLSTM*) shares.
_RECURRENT: dict[str, Any] = {"weight_names": wn.recurrent, "keras3_weights": wn.in_cell, "masks": RNN_MASK}
#: tf.keras folds an RNN's ``initial_state`` into its first argument; its SimpleRNN, LSTM, GRU and RNN
#: have a ``time_major`` option Keras 3 does not.
_RNN_WRITING = Keras3Rules(writing.rnn, folds_initial_state=True, time_major=True)
_CONV_LSTM_WRITING = Keras3Rules(folds_initial_state=True)
_NO_H5_INITIAL_STATE = LegacyH5Rules(no_initial_state=True)

#: The steps of the recurrent layers: LSTM's gates i, f, c, o and two states (h, c); GRU's z, r, h.
SIMPLE_RNN_STEP = Recurrence(gates=1, states=1)
LSTM_STEP = Recurrence(gates=4, states=2)
GRU_STEP = Recurrence(gates=3, states=1, bias="reset_after")
CONV_LSTM_STEP = Recurrence(gates=4, states=2, convolutional=True)
_CUDNN_MASK = masks(k2=MaskBehaviour("first", "rnn"))

SPECS = (
    *layers(
        ("ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D"),
        config=CONV_LSTM_CONFIG,
        recurrence=CONV_LSTM_STEP,
        keras3_rules=_CONV_LSTM_WRITING,
        **_RECURRENT,
    ),
    layer(
        "CuDNNGRU",
        keras_versions=("2",),
        kernel=NO_KERNEL,
        masks=_CUDNN_MASK,
        recurrence=Recurrence(gates=3, states=1, bias="cudnn"),
    ),
    layer(
        "CuDNNLSTM",
        keras_versions=("2",),
        kernel=NO_KERNEL,
        masks=_CUDNN_MASK,
        recurrence=Recurrence(gates=4, states=2, bias="cudnn"),
    ),
    layer("UnifiedGRU", keras_versions=("2",), kernel=NO_KERNEL, recurrence=GRU_STEP),
    layer("UnifiedLSTM", keras_versions=("2",), kernel=NO_KERNEL, recurrence=LSTM_STEP),
    layer(
        "Bidirectional",
        config=ConfigSpec(equivalent=upgrades.bidirectional_equivalent),
        keras3_rules=Keras3Rules(writing.wrapper, folds_initial_state=True),
        legacy_h5=_NO_H5_INITIAL_STATE,
        wrapped_keys=("layer", "backward_layer"),
        directions=("forward", "backward"),
        weight_names=wn.wrapped,
        keras3_weights=wn.bidirectional_layers,
        masks=masks(
            MaskBehaviour("first", "bidirectional"), MaskBehaviour("call", "bidirectional", _RNN_CALL)
        ),
    ),
    layer(
        "GRU",
        config=GRU_CONFIG,
        recurrence=GRU_STEP,
        keras3_rules=_RNN_WRITING,
        legacy_h5=_NO_H5_INITIAL_STATE,
        **_RECURRENT,
    ),
    layer(
        "LSTM",
        config=LSTM_CONFIG,
        recurrence=LSTM_STEP,
        keras3_rules=_RNN_WRITING,
        legacy_h5=_NO_H5_INITIAL_STATE,
        **_RECURRENT,
    ),
    # The generic RNN(cell): kernel, shape, weight and MAC rules attach from the provider modules
    # (cells SimpleRNNCell, LSTMCell, GRUCell and StackedRNNCells of them); its variables sit in the
    # cell (per cell under cell/cells/<name> for StackedRNNCells).
    layer(
        "RNN",
        keras3_weights=wn.rnn_cell_groups,
        legacy_weight_path=wn.stacked_cell_path,
        masks=RNN_MASK,
        keras3_rules=Keras3Rules(writing.generic_rnn, folds_initial_state=True, time_major=True),
        # measured: Keras 3's .h5 loader does not build a Keras 2 RNN(cell) layer's cells as tf_keras does
        legacy_h5=LegacyH5Rules(
            refuse_from_keras2="a Keras 2 RNN(cell) layer: Keras 3's .h5 loader does not build its cells' weights"
        ),
    ),
    layer(
        "SimpleRNN",
        config=SIMPLE_RNN_CONFIG,
        recurrence=SIMPLE_RNN_STEP,
        linear_weights=("kernel", "recurrent_kernel", "bias"),
        keras3_rules=_RNN_WRITING,
        legacy_h5=_NO_H5_INITIAL_STATE,
        **_RECURRENT,
    ),
    layer(
        "TimeDistributed",
        keras3_rules=Keras3Rules(writing.wrapper, per_step=True),
        wrapped_keys=("layer",),
        weight_names=wn.wrapped,
        keras3_weights=wn.wrapped_layer,
        masks=masks(
            MaskBehaviour("first", "time_distributed"),
            MaskBehaviour("call", "pass", ("inputs", "training", "mask"), note="the default compute_mask"),
        ),
    ),
)
