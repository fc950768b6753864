"""Every kernel family, imported explicitly so the supported list is readable in one file."""

from modelgraph.runner.kernels import (  # noqa: F401  (imported for their @register side effects)
    applications,
    attention,
    conv,
    core,
    fused,
    merge,
    normalization,
    ops,
    pooling,
    preprocessing,
    recurrent,
    reshaping,
)
