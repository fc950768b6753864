"""Keras 3 op nodes (``keras.src.ops``), keyed ``op:<Class>``: their class names clash with layers."""

from modelgraph.catalogue import writing
from modelgraph.catalogue.spec import (
    NEEDS_SHAPES,
    NO_KERNEL,
    NO_SHAPE_RULE,
    LegacyH5Rules,
    op,
    ops,
    zero_macs,
)

#: Shapes and a kernel; no multiply-accumulates (element-wise, reductions, data movement).
RUN = (
    "Abs", "Absolute", "Add", "All", "Any", "Argmax", "Argmin", "Cast", "Ceil", "Celu", "Clip",
    "Concatenate", "ConvertToTensor", "Copy", "Cos", "Cumsum", "Divide", "Elu", "Equal", "Erf",
    "Exp", "ExpandDims", "Expm1", "Flip", "Floor", "FloorDivide", "Gelu", "GetItem", "Glu", "Greater",
    "GreaterEqual", "HardShrink", "HardSigmoid", "HardSilu", "HardTanh", "LeakyRelu", "Less",
    "LessEqual", "Log", "Log1p", "Log2", "LogSigmoid", "LogSoftmax", "LogicalAnd", "LogicalNot", "LogicalOr",
    "LogicalXor", "Logsumexp", "Max", "Maximum", "Mean", "Min", "Minimum", "Mod", "Multiply",
    "Negative", "Normalize", "NotEqual", "OnesLike", "Power", "Prod", "Reciprocal", "Relu", "Relu6", "Reshape",
    "Round", "Rsqrt", "Selu", "Sigmoid", "Sign", "Silu", "Sin", "SoftShrink", "Softmax", "Softplus",
    "Softsign", "SparsePlus", "SparseSigmoid", "Split", "Sqrt", "Square", "Squareplus", "Squeeze",
    "Stack", "Std", "StopGradient", "Subtract", "Sum", "Tanh", "TanhShrink", "Tile", "Transpose",
    "Tril", "Triu", "TrueDivide", "Var", "Where", "ZerosLike",
)  # fmt: skip

#: Shapes, no kernel yet.
SHAPES_ONLY = (
    "Amax", "Amin", "Arccos", "Arccosh", "Arcsin", "Arcsinh", "Arctan", "Arctan2", "Arctanh",
    "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Cbrt", "Conjugate", "Cosh", "Erfinv", "Exp2",
    "HardSwish", "Heaviside", "Hypot", "Identity", "Imag", "IsFinite", "IsInf", "IsNan", "Log10",
    "Median", "Mish", "NanToNum", "Real", "Roll", "Signbit", "Sinh", "Sort", "Sparsemax",
    "Swish", "Tan", "Threshold", "Trunc",
)  # fmt: skip

#: A kernel, no static shape rule yet.
RUN_WITHOUT_SHAPES = (
    "Moveaxis", "Pad", "Repeat", "SaturateCast", "Swapaxes", "Take", "Tensordot", "Unstack",
)  # fmt: skip

#: Shapes, a MAC rule and a kernel.
COUNTED = (
    "Dot", "Einsum", "Matmul",
)  # fmt: skip

#: How the legacy .h5 writer replaces an op node by a layer tf_keras has (it has no op nodes).
LEGACY_H5 = {
    "Add": LegacyH5Rules(merge_layer="Add", rescaling=writing.shift_by),
    "Subtract": LegacyH5Rules(merge_layer="Subtract", rescaling=writing.subtract),
    "Multiply": LegacyH5Rules(merge_layer="Multiply", rescaling=writing.scale_by),
    "Maximum": LegacyH5Rules(merge_layer="Maximum"),
    "Minimum": LegacyH5Rules(merge_layer="Minimum"),
}

#: Ops whose config carries a ``dtype`` (how Keras 3's legacy .h5, without ``module``, tells them apart).
CONFIG_DTYPE = frozenset(
    {"Cast", "ConvertToTensor", "SaturateCast", "Cumsum", "Cumprod", "ZerosLike", "OnesLike"}
)

#: Ops whose output holds their input's values, moved or cast (ids stay ids through them).
KEEPS_VALUES = frozenset(
    {"Cast", "ConvertToTensor", "ExpandDims", "GetItem", "Reshape", "Squeeze", "Transpose"}
)

SPECS = (
    *(
        op(
            name,
            macs=zero_macs,
            legacy_h5=LEGACY_H5.get(name),
            config_dtype=name in CONFIG_DTYPE,
            keeps_values=name in KEEPS_VALUES,
        )
        for name in RUN
    ),
    op(
        "Cumprod",
        macs=zero_macs,
        onnx="ONNX has a cumulative sum (CumSum) but no cumulative product",
        config_dtype=True,
    ),
    *ops(SHAPES_ONLY, kernel=NO_KERNEL, macs=zero_macs),
    *(
        op(name, shape=NO_SHAPE_RULE, macs=NEEDS_SHAPES, config_dtype=name in CONFIG_DTYPE)
        for name in RUN_WITHOUT_SHAPES
    ),
    *ops(COUNTED),
)
