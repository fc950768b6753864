"""tf.keras ``TFOpLambda``/``SlicingOpLambda`` functions, keyed ``tf:<function>``."""

from modelgraph import weight_names as wn
from modelgraph.catalogue.spec import (
    BY_FUNCTION,
    NEEDS_SHAPES,
    NO_KERNEL,
    NO_SHAPE_RULE,
    layers,
    tf_op,
    tf_ops,
    zero_macs,
)

#: Shapes and a kernel; no multiply-accumulates (element-wise, reductions, data movement).
RUN = (
    "__operators__.add", "__operators__.eq", "__operators__.getitem", "__operators__.ne", "cast",
    "clip_by_value", "compat.v1.transpose", "concat", "expand_dims", "identity", "math.abs", "math.add",
    "math.argmax", "math.argmin", "math.ceil", "math.cos", "math.cumsum", "math.divide",
    "math.divide_no_nan", "math.equal", "math.erf", "math.exp", "math.floor", "math.floordiv",
    "math.floormod", "math.greater", "math.greater_equal", "math.l2_normalize", "math.less",
    "math.less_equal", "math.log", "math.log1p", "math.logical_and", "math.logical_not",
    "math.logical_or", "math.maximum", "math.minimum", "math.multiply", "math.negative",
    "math.not_equal", "math.pow", "math.reciprocal", "math.reduce_all", "math.reduce_any",
    "math.reduce_logsumexp", "math.reduce_max", "math.reduce_mean", "math.reduce_min",
    "math.reduce_prod", "math.reduce_std", "math.reduce_sum", "math.reduce_variance", "math.rsqrt",
    "math.sigmoid", "math.sign", "math.sin", "math.softplus", "math.softsign", "math.sqrt",
    "math.square", "math.squared_difference", "math.subtract", "math.tanh", "math.truediv", "nn.elu",
    "nn.gelu", "nn.leaky_relu", "nn.log_softmax", "nn.relu", "nn.relu6", "nn.selu", "nn.sigmoid",
    "nn.silu", "nn.softmax", "nn.softplus", "reshape", "reverse", "split", "squeeze", "stack", "tile",
    "transpose", "where",
)  # fmt: skip

#: Shapes, no kernel yet.
SHAPES_ONLY = (
    "__operators__.floordiv", "__operators__.ge", "__operators__.gt", "__operators__.le",
    "__operators__.lt", "__operators__.mod", "__operators__.mul", "__operators__.neg",
    "__operators__.pow", "__operators__.sub", "__operators__.truediv", "argmax", "argmin",
    "compat.v1.image.resize", "dtypes.cast", "image.convert_image_dtype", "image.resize",
    "linalg.transpose", "math.add_n", "math.is_nan", "math.multiply_no_nan", "math.round",
    "math.softmax", "nn.bias_add", "nn.l2_normalize", "nn.swish", "nn.tanh", "reduce_max",
    "reduce_mean", "reduce_min", "reduce_sum", "stop_gradient",
)  # fmt: skip

#: A kernel, no static shape rule yet.
RUN_WITHOUT_SHAPES = (
    "compat.v1.expand_dims", "compat.v1.floor_div", "compat.v1.gather", "compat.v1.pad",
    "compat.v1.squeeze", "gather", "linalg.adjoint", "linalg.matrix_transpose", "math.expm1",
    "math.log_sigmoid", "math.logical_xor", "math.mod", "nn.softsign", "pad", "unstack",
)  # fmt: skip

#: Shapes and a MAC rule, no kernel yet.
SHAPES_AND_MACS = (
    "__operators__.matmul", "matmul",
)  # fmt: skip

#: Shapes, a MAC rule and a kernel.
COUNTED = (
    "linalg.matmul",
)  # fmt: skip

#: Functions whose output holds their input's values, moved or cast (ids stay ids through them).
KEEPS_VALUES = frozenset({"__operators__.getitem", "cast", "reshape"})

SPECS = (
    # The layer classes themselves: a TFOpLambda layer's key is its function's.
    *layers(
        ("SlicingOpLambda", "TFOpLambda"),
        keras_versions=("2",),
        weight_names=wn.no_weights,
        shape=BY_FUNCTION,
        kernel=BY_FUNCTION,
        macs=BY_FUNCTION,
    ),
    *(tf_op(name, macs=zero_macs, keeps_values=name in KEEPS_VALUES) for name in RUN),
    *tf_ops(SHAPES_ONLY, kernel=NO_KERNEL, macs=zero_macs),
    *tf_ops(RUN_WITHOUT_SHAPES, shape=NO_SHAPE_RULE, macs=NEEDS_SHAPES),
    *tf_ops(SHAPES_AND_MACS, kernel=NO_KERNEL),
    *tf_ops(COUNTED),
)
