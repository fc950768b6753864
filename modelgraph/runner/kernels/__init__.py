"""Every kernel family, imported explicitly so the supported list is readable in one file.

These are the reference kernels; the fast kernels chosen in their place at plan time and the plan's
merged steps are listed in ``modelgraph/runner/fast/__init__.py``.
"""

from modelgraph.runner.kernels import (  # noqa: F401  (imported for their @register side effects)
    applications,
    attention,
    conv,
    core,
    merge,
    normalization,
    ops,
    pooling,
    preprocessing,
    recurrent,
    reshaping,
)
