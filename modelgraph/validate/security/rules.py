"""The security rule table (``SEC``): every rule's id, default severity, meaning and hint, in one place.

``SEC0xx`` rules come from a file's configs (:mod:`.config_scanner`), ``SEC1xx`` from its container
(:mod:`.container_scanner`). :mod:`modelgraph.validate.registry` merges them with the other families.
"""

from __future__ import annotations

from dataclasses import dataclass

from modelgraph.validate.issue import Issue, Severity


@dataclass(frozen=True, slots=True)
class SecurityRule:
    """One rule: its default ``severity``, what a finding means, and what to do (``hint``)."""

    severity: Severity
    meaning: str
    hint: str


SECURITY_RULES: dict[str, SecurityRule] = {
    "SEC001": SecurityRule(
        "error",
        "Lambda layer carries Python bytecode (Keras executes it on load or call)",
        "Replace the Lambda with a built-in layer or a registered custom layer; never load it with safe_mode=False.",
    ),
    "SEC002": SecurityRule(
        "error",
        "serialized Python function (__lambda__) outside a Lambda layer",
        "Replace the serialized function with a registered, named object.",
    ),
    "SEC003": SecurityRule(
        "error",
        "object module outside the keras/keras_hub/keras_cv/keras_nlp/tf_keras namespaces",
        "Refuse the file unless you wrote the module it names.",
    ),
    "SEC004": SecurityRule(
        "warning",
        "custom object or function: needs user Python code to load",
        "Load only with the custom object's code at hand and only if you trust it.",
    ),
    "SEC005": SecurityRule(
        "error",
        "TorchModuleWrapper: the module is a torch pickle",
        "Refuse the file: loading it unpickles a torch module.",
    ),
    "SEC006": SecurityRule(
        "error",
        "TFSMLayer: loads an external SavedModel",
        "Refuse the file, or inspect the referenced SavedModel separately.",
    ),
    "SEC007": SecurityRule(
        "error",
        "safe_mode-bypass gadget (load_model, enable_unsafe_deserialization, get_file, ...)",
        "Refuse the file: it tries to turn off Keras's safe mode or load other files.",
    ),
    "SEC008": SecurityRule(
        "error",
        "lookup-layer vocabulary given as a file path or URL (read by Keras)",
        "Embed the vocabulary in the config (a list) instead of a path.",
    ),
    "SEC009": SecurityRule(
        "error",
        "legacy Merge layer with a lambda/function mode",
        "Replace the legacy Merge layer with Add/Concatenate/... layers.",
    ),
    "SEC010": SecurityRule(
        "info",
        "TFOpLambda/SlicingOpLambda: a TensorFlow op (needs TF; not code execution)",
        "Nothing to fix; the op needs TensorFlow to run in Keras.",
    ),
    "SEC011": SecurityRule(
        "warning",
        "node called with training=True (training behaviour at inference)",
        "Save the model from a call with training=False (or None).",
    ),
    "SEC012": SecurityRule(
        "warning",
        "NaN/Infinity in the config (non-standard JSON)",
        "Replace NaN/Infinity in the config with finite values or null.",
    ),
    "SEC013": SecurityRule(
        "warning",
        "config value that looks like a file path or URL",
        "Check that the value is not read by the loader.",
    ),
    "SEC014": SecurityRule(
        "error",
        "layer or model name that is a file path: absolute, with a '..' part, a backslash or a NUL",
        "Rename the layer: a name that walks out of a folder must never reach a writer or a directory store.",
    ),
    "SEC100": SecurityRule(
        "error",
        "container could not be scanned",
        "Check the file is complete and a Keras model (re-download or re-save it); it was not read.",
    ),
    "SEC101": SecurityRule(
        "error",
        "zip member with an absolute path, '..', backslash or NUL",
        "Refuse the archive: a member name could write outside the folder it is extracted to.",
    ),
    "SEC102": SecurityRule(
        "error",
        "zip member that is a symbolic link or special file",
        "Refuse the file: replace links and special files with the regular files Keras writes.",
    ),
    "SEC103": SecurityRule(
        "error",
        "zip bomb: too many members, declared size over the limit, or ratio too high",
        "Refuse the archive: its declared sizes would exhaust memory or disk.",
    ),
    "SEC104": SecurityRule(
        "error",
        "zip member name appears more than once",
        "Refuse the archive: two readers may pick different copies of the member.",
    ),
    "SEC105": SecurityRule(
        "error",
        "code or pickle member inside a .keras archive",
        "Refuse the archive: a .keras file holds no code or pickles.",
    ),
    "SEC106": SecurityRule(
        "warning",
        "unexpected member inside a .keras archive",
        "Check where the member came from; Keras ignores it, other tools may not.",
    ),
    "SEC107": SecurityRule(
        "error",
        "npz weights with pickled object arrays (reading them executes code)",
        "Re-save the weights as HDF5 (.weights.h5); never load pickled arrays.",
    ),
    "SEC108": SecurityRule(
        "error",
        "HDF5 external link",
        "Refuse the file: the link reads another file.",
    ),
    "SEC109": SecurityRule(
        "warning",
        "HDF5 soft link",
        "Re-save the model with Keras: its files never contain soft links.",
    ),
    "SEC110": SecurityRule(
        "error",
        "HDF5 soft-link cycle",
        "Refuse the file: the soft links loop.",
    ),
    "SEC111": SecurityRule(
        "error",
        "HDF5 dataset with external storage (reads another file)",
        "Refuse the file: the dataset reads another file.",
    ),
    "SEC112": SecurityRule(
        "error",
        "HDF5 virtual dataset (maps other files)",
        "Refuse the file: the dataset maps other files.",
    ),
    "SEC113": SecurityRule(
        "error",
        "HDF5 dataset whose declared size is a shape bomb or over the cap",
        "Refuse the file: reading the dataset would allocate what it only declares.",
    ),
    "SEC114": SecurityRule(
        "error",
        "JSON nesting or size bomb",
        "Refuse the file: its JSON would exhaust the parser.",
    ),
    "SEC115": SecurityRule(
        "error",
        "'enable_unsafe_deserialization' in the raw config text",
        "Refuse the file: do not load it with Keras.",
    ),
    "SEC116": SecurityRule(
        "warning",
        "npz weights pickled in Keras's own layout (NumPy arrays only); Keras unpickles them",
        "Re-save the weights as HDF5 (.weights.h5) to avoid pickles altogether.",
    ),
    "SEC117": SecurityRule(
        "error",
        "zip member Keras rejects: bytes not matching its CRC-32, or a local-header name that differs from the central directory's (altered after writing, or two names for one member)",
        "Re-download or re-save the model: the archive was changed after Keras wrote it.",
    ),
    "SEC118": SecurityRule(
        "error",
        "HDF5 structure over the bounds: too many links, groups nested too deep, or weight/layer names listed more than once",
        "Refuse the file: a Keras weights file is far smaller and lists each name once.",
    ),
    "SEC119": SecurityRule(
        "error",
        "polyglot: the file is both a zip (.keras) and an HDF5 file (Keras reads either part by extension)",
        "Refuse the file: a file Keras writes is either a zip or an HDF5 file, never both.",
    ),
}

RULES: dict[str, tuple[Severity, str]] = {rid: (r.severity, r.meaning) for rid, r in SECURITY_RULES.items()}
"""Every rule id with its severity and meaning (the table without hints)."""


def issue(rule: str, message: str, where: str, hint: str = "", path: str = "") -> Issue:
    """A finding of ``rule`` with its default severity; ``hint`` defaults to the rule's own."""
    r = SECURITY_RULES[rule]
    return Issue(rule=rule, severity=r.severity, message=message, where=where, hint=hint or r.hint, path=path)
