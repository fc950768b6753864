"""Security rules: what a Keras loader would execute, import, fetch or unpickle, found statically.

Nothing here imports a module named by a file, unpickles, calls ``marshal.loads`` or executes code.
One module per job:

* :mod:`.rules`: the rule table (id, severity, meaning, hint);
* :mod:`.pickle_reader`: pickles read as opcodes (:func:`pickle_verdict`);
* :mod:`.marshal_reader`: Lambda bytecode previewed by a bounded marshal reader (:func:`preview_bytecode`);
* :mod:`.config_scanner`: :func:`scan_config` walks a parsed model config (rules ``SEC0xx``);
* :mod:`.container_scanner`: :func:`scan_container` checks the file container (rules ``SEC1xx``);
  :func:`scan_path` does both for a model file or an unzipped ``.keras`` directory.
"""

from modelgraph.validate.security.config_scanner import (
    ALLOWED_NAMESPACES,
    DANGEROUS_BUILTINS,
    DANGEROUS_MODULES,
    GADGET_NAMES,
    looks_like_path,
    scan_config,
)
from modelgraph.validate.security.container_scanner import (
    CODE_SUFFIXES,
    KERAS_MEMBERS,
    scan_container,
    scan_path,
    scan_path_with_configs,
)
from modelgraph.validate.security.marshal_reader import (
    MAX_BYTECODE_BYTES,
    MAX_MARSHAL_DEPTH,
    MAX_MARSHAL_OBJECTS,
    SUSPICIOUS_NAMES,
    BytecodePreview,
    CodeSummary,
    decode_bytecode_blob,
    preview_bytecode,
)
from modelgraph.validate.security.pickle_reader import MAX_PICKLE_SCAN_BYTES, pickle_verdict
from modelgraph.validate.security.rules import RULES, SECURITY_RULES, SecurityRule

__all__ = [
    "ALLOWED_NAMESPACES",
    "CODE_SUFFIXES",
    "DANGEROUS_BUILTINS",
    "DANGEROUS_MODULES",
    "GADGET_NAMES",
    "KERAS_MEMBERS",
    "MAX_BYTECODE_BYTES",
    "MAX_MARSHAL_DEPTH",
    "MAX_MARSHAL_OBJECTS",
    "MAX_PICKLE_SCAN_BYTES",
    "RULES",
    "SECURITY_RULES",
    "SUSPICIOUS_NAMES",
    "BytecodePreview",
    "CodeSummary",
    "SecurityRule",
    "decode_bytecode_blob",
    "looks_like_path",
    "pickle_verdict",
    "preview_bytecode",
    "scan_config",
    "scan_container",
    "scan_path",
    "scan_path_with_configs",
]
