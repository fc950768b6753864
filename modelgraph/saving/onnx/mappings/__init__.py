"""Every ONNX mapping family, imported explicitly so the supported list is readable in one file."""

from modelgraph.saving.onnx.mappings import (  # noqa: F401  (imported for their @register side effects)
    attention,
    conv,
    core,
    merge,
    normalization,
    ops,
    pooling,
    preprocessing,
    recurrent,
    resample,
    reshaping,
)
