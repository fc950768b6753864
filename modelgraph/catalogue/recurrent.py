"""Recurrent layers and their wrappers (Bidirectional, TimeDistributed)."""

from modelgraph import weight_names as wn
from modelgraph.catalogue.spec import NEEDS_SHAPES, NO_KERNEL, NO_SHAPE_RULE, NO_WEIGHT_SHAPES, Masks, layer

SPECS = (
    layer("Bidirectional", weight_names=wn.wrapped, masks=Masks(produces="bidirectional", consumes="first")),
    layer("ConvLSTM1D", weight_names=wn.recurrent, masks=Masks(produces="rnn", consumes="first")),
    layer("ConvLSTM2D", weight_names=wn.recurrent, masks=Masks(produces="rnn", consumes="first")),
    layer("ConvLSTM3D", weight_names=wn.recurrent, masks=Masks(produces="rnn", consumes="first")),
    layer("CuDNNGRU", keras_versions=("2",), kernel=NO_KERNEL, masks=Masks(produces="rnn", consumes="first")),
    layer(
        "CuDNNLSTM", keras_versions=("2",), kernel=NO_KERNEL, masks=Masks(produces="rnn", consumes="first")
    ),
    layer("GRU", weight_names=wn.recurrent, masks=Masks(produces="rnn", consumes="first")),
    layer("LSTM", weight_names=wn.recurrent, masks=Masks(produces="rnn", consumes="first")),
    layer(
        "RNN",
        shape=NO_SHAPE_RULE,
        kernel=NO_KERNEL,
        macs=NEEDS_SHAPES,
        weight_shapes=NO_WEIGHT_SHAPES,
        masks=Masks(produces="rnn", consumes="first"),
    ),
    layer("SimpleRNN", weight_names=wn.recurrent, masks=Masks(produces="rnn", consumes="first")),
    layer(
        "TimeDistributed", weight_names=wn.wrapped, masks=Masks(produces="time_distributed", consumes="first")
    ),
    layer("UnifiedGRU", keras_versions=("2",), kernel=NO_KERNEL),
    layer("UnifiedLSTM", keras_versions=("2",), kernel=NO_KERNEL),
)
