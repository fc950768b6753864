"""Keras 3 op nodes (``keras.src.ops``), keyed ``op:<Class>``: their class names clash with layers."""

from modelgraph.catalogue.spec import NEEDS_SHAPES, NO_KERNEL, NO_SHAPE_RULE, op, ops, zero_macs

#: Shapes and a kernel; no multiply-accumulates (element-wise, reductions, data movement).
RUN = (
    "Abs", "Absolute", "Add", "All", "Any", "Argmax", "Argmin", "Cast", "Ceil", "Celu", "Clip",
    "Concatenate", "ConvertToTensor", "Copy", "Cos", "Cumsum", "Divide", "Elu", "Equal", "Erf",
    "Exp", "ExpandDims", "Expm1", "Flip", "Floor", "FloorDivide", "Gelu", "GetItem", "Glu", "Greater",
    "GreaterEqual", "HardShrink", "HardSigmoid", "HardSilu", "HardTanh", "LeakyRelu", "Less",
    "LessEqual", "Log", "Log1p", "LogSigmoid", "LogSoftmax", "LogicalAnd", "LogicalNot", "LogicalOr",
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
    "Log2", "Median", "Mish", "NanToNum", "Real", "Roll", "Signbit", "Sinh", "Sort", "Sparsemax",
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

SPECS = (
    *ops(RUN, macs=zero_macs),
    op("Cumprod", macs=zero_macs, onnx="ONNX has a cumulative sum (CumSum) but no cumulative product"),
    *ops(SHAPES_ONLY, kernel=NO_KERNEL, macs=zero_macs),
    *ops(RUN_WITHOUT_SHAPES, shape=NO_SHAPE_RULE, macs=NEEDS_SHAPES),
    *ops(COUNTED),
)
