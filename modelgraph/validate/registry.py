"""The rule table: every validation rule in one place, with a stable id, a family and a severity.

Ids are stable across releases (a retired id is never reused). One family per prefix:

==========  ========  =========================================================================
prefix      family    what it checks
==========  ========  =========================================================================
``STR``     structure the container, the JSON, the config schema and the layer/node graph
``SHP``     shapes    static shape inference through the whole graph
``WGT``     weights   stored weights against the config (names, shapes, dtypes; values on request)
``SEC``     security  what Keras would execute, import, fetch or unpickle (:mod:`.security`)
``RUN``     runtime   layers and options the NumPy runner cannot execute
``CAT``     catalogue custom classes and functions modelgraph does not know (plugins teach them)
==========  ========  =========================================================================

:func:`rules_markdown` renders ``docs/rules.md`` from this table (a test keeps the file in sync).
"""

from __future__ import annotations

from dataclasses import dataclass

from modelgraph.validate import security
from modelgraph.validate.issue import Issue, Severity

FAMILIES: dict[str, str] = {
    "STR": "structure",
    "SHP": "shapes",
    "WGT": "weights",
    "SEC": "security",
    "RUN": "runtime",
    "CAT": "catalogue",
}


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule: ``id`` (``STR004``), ``family``, default ``severity``, a short ``title``, what it
    means (``meaning``), and how to fix it (``hint``)."""

    id: str
    family: str
    severity: Severity
    title: str
    meaning: str
    hint: str


def _r(rid: str, severity: Severity, title: str, meaning: str, hint: str) -> Rule:
    return Rule(rid, FAMILIES[rid[:3]], severity, title, meaning, hint)


_OWN: list[Rule] = [
    # --- structure ---------------------------------------------------------------------------------
    _r(
        "STR001",
        "error",
        "unreadable container",
        "The file cannot be read as a model container: truncated or corrupt zip/HDF5, an empty file, "
        "a missing config member, or a JSON file whose top level is not a model.",
        "Re-save the model with Keras (model.save('model.keras')); check that the upload/download was complete.",
    ),
    _r(
        "STR002",
        "error",
        "invalid JSON",
        "A config document (config.json, model_config, model.json) is not valid JSON or not UTF-8; "
        "the message gives the line and column.",
        "Re-export the config; do not edit config.json by hand without a JSON validator.",
    ),
    _r(
        "STR003",
        "error",
        "config schema error",
        "A model or layer record does not follow any Keras config schema (a required key is missing or "
        "has the wrong type); every error is reported with its JSON path.",
        "Compare the record at the JSON path with what Keras writes (class_name, config, name, inbound_nodes).",
    ),
    _r(
        "STR004",
        "error",
        "dangling reference",
        "A node, or the model's input/output list, names a layer that does not exist.",
        "Rename the reference to an existing layer, or restore the missing layer.",
    ),
    _r(
        "STR005",
        "error",
        "index out of range",
        "A reference's node index or tensor index is past what the producing layer has.",
        "Fix the [layer, node_index, tensor_index] triple; node indices of nested models are 1-based in Keras 2.",
    ),
    _r(
        "STR006",
        "error",
        "cycle",
        "The layer/node graph has a cycle (each cycle is reported); Keras graphs are acyclic.",
        "Break the cycle: a layer cannot consume its own (transitive) output.",
    ),
    _r(
        "STR007",
        "error",
        "duplicate name",
        "Two layers of one model share a name; Keras requires unique names.",
        "Rename one of the layers (and every reference to it).",
    ),
    _r(
        "STR008",
        "error",
        "output not reachable from the inputs",
        "An output depends on an input layer that is not one of the model's inputs "
        "(Keras's 'Graph disconnected' error).",
        "Add the input layer to the model's inputs, or rewire the layers that read it.",
    ),
    _r(
        "STR009",
        "warning",
        "layer reaches no output",
        "A layer (or one call of it) contributes to no model output; Keras drops it from the model.",
        "Remove the dead layer, or connect it to an output.",
    ),
    _r(
        "STR010",
        "warning",
        "unused input",
        "A model input is not used by any output.",
        "Remove the input, or connect it to the layers that should consume it.",
    ),
    _r(
        "STR011",
        "error",
        "broken model structure",
        "Other structural errors: a model without outputs, a model input that is not an InputLayer, an "
        "InputLayer in the middle of a Sequential, a node that cannot be parsed.",
        "Rebuild the model in Keras and save it again.",
    ),
    _r(
        "STR012",
        "error",
        "unsupported model format",
        "A recognised format that holds no reconstructible layer graph: a TensorFlow SavedModel, a "
        "subclassed model, a bare layer.",
        "Save a Functional or Sequential model as .keras or .h5.",
    ),
    _r(
        "STR013",
        "info",
        "weights-only file",
        "The file holds weights but no architecture (.weights.h5, sharded .weights.json, save_weights .h5); "
        "only its container is checked.",
        "Validate the architecture file, or both together with the Python API (modelgraph.load(arch, weights=...)).",
    ),
    _r(
        "STR014",
        "warning",
        "validator check failed",
        "A check crashed on this file; the other checks still ran. This is a bug in modelgraph.",
        "Report it with the file (or a minimal reproduction) and the message.",
    ),
    # --- shapes ------------------------------------------------------------------------------------
    _r(
        "SHP001",
        "error",
        "incompatible merge",
        "Inputs of a merge layer or op (Add, Multiply, Concatenate, Dot, matmul, broadcasting ops) have "
        "shapes that cannot be combined.",
        "Make the merged tensors agree (same shape, or broadcastable; equal non-axis dims for Concatenate).",
    ),
    _r(
        "SHP002",
        "error",
        "input does not fit the kernel",
        "A stored weight's shape does not fit the input the layer is called on (Dense/Conv input channels "
        "against the kernel, Embedding, RNN input size, ...).",
        "Check the layer's input (units/filters of the previous layer) against the kernel's input dimension.",
    ),
    _r(
        "SHP003",
        "error",
        "reshape size mismatch",
        "A Reshape (or reshape op) asks for a shape whose element count differs from its input's.",
        "Fix target_shape so that its product equals the input's element count (one -1 is allowed).",
    ),
    _r(
        "SHP004",
        "error",
        "zero, negative or out-of-range dimension",
        "An inferred or declared shape has a dimension <= 0 (e.g. a convolution or pooling window larger "
        "than its input, or a bad input shape) or past the int64 range no Keras tensor can exceed.",
        "Use a larger input, smaller kernels/strides, or padding='same'; or fix the declared input shape.",
    ),
    _r(
        "SHP005",
        "error",
        "rank mismatch",
        "A layer gets an input of a rank it cannot handle (Conv2D on a 3-D tensor, LSTM on a 2-D one, ...).",
        "Insert a Reshape/Flatten/ExpandDims, or use the layer variant for this rank.",
    ),
    _r(
        "SHP006",
        "error",
        "wrong number of inputs",
        "A layer or nested model is called with a number of tensors it does not take, or reads an output "
        "index its producer does not have.",
        "Call the layer with the inputs it expects.",
    ),
    _r(
        "SHP007",
        "error",
        "invalid axis or index",
        "An axis, index, slice or split in the config is out of range for the input's rank or size.",
        "Fix the axis/index in the layer config for the actual input shape.",
    ),
    _r(
        "SHP008",
        "error",
        "unusable config value",
        "A config value that shape inference needs is missing, of the wrong type, or out of range "
        "(units <= 0, a non-integer kernel size, ...).",
        "Fix the value at the reported layer.",
    ),
    _r(
        "SHP009",
        "warning",
        "input shape unknown or inconsistent",
        "An input layer declares no shape (shapes downstream are unknown), or a nested model is called "
        "with a shape that differs from its own input.",
        "Declare the input shape (Input(shape=...)); make the nested model's input match its caller.",
    ),
    _r(
        "SHP010",
        "info",
        "no shape rule",
        "No static shape rule exists for this layer class or op; shapes after it are unknown and are not "
        "checked.",
        "Nothing to fix in the model; shape checks downstream of this layer are skipped.",
    ),
    _r(
        "SHP011",
        "error",
        "shape conflict",
        "Other shape conflicts found by inference (dimension mismatches inside one layer, dtype "
        "conflicts, ...).",
        "Read the message: it names the expected and the found shape.",
    ),
    _r(
        "SHP012",
        "warning",
        "implausibly large tensor",
        "A declared or inferred tensor holds over 2**31 elements per sample (8 GiB as float32): no runtime "
        "can run it. Reported where such a tensor first appears, usually a typo in an input shape.",
        "Check the declared input shape (and any Reshape/UpSampling sizes) at the reported layer.",
    ),
    # --- weights -----------------------------------------------------------------------------------
    _r(
        "WGT001",
        "error",
        "missing weight",
        "The config implies a weight (e.g. Dense(use_bias=True) needs 'bias') that the file does not store.",
        "Re-save the model with its weights; check use_bias/center/scale flags against the stored arrays.",
    ),
    _r(
        "WGT002",
        "error",
        "unexpected weight",
        "The file stores a weight that no layer of the config expects (an extra array, or one filed under "
        "a layer that does not exist).",
        "Remove the array, or fix the layer config that should own it.",
    ),
    _r(
        "WGT003",
        "error",
        "mis-shaped weight",
        "A stored weight's shape differs from the shape the layer config and build_config imply (units, "
        "filters, kernel_size, input_dim, ...). Reported when shape inference could not check the weight "
        "against the layer's actual input; otherwise the same mismatch is SHP002.",
        "Re-save the model; the config and the stored arrays come from different models.",
    ),
    _r(
        "WGT004",
        "error",
        "wrong weight dtype",
        "A weight that Keras keeps as floating point is stored as an integer, boolean, string or complex "
        "array (quantized layers excepted).",
        "Store the weight as float32 (or the layer's variable dtype).",
    ),
    _r(
        "WGT005",
        "warning",
        "weight precision differs",
        "A floating-point weight is stored in a precision other than the layer's variable dtype "
        "(e.g. float64 for a float32 layer); Keras casts it on load.",
        "Cast the weights to the layer's variable dtype before saving.",
    ),
    _r(
        "WGT006",
        "error",
        "NaN or Inf weights",
        "A float weight contains NaN or infinite values (the values are scanned by default, in chunks; "
        "--no-check-values skips the scan).",
        "Retrain or restore the weights from a checkpoint before the divergence.",
    ),
    _r(
        "WGT007",
        "warning",
        "all-zero kernel",
        "A kernel/embedding matrix is entirely zero, so the layer outputs only its bias (part of the "
        "value scan; biases and statistics may legitimately be zero).",
        "Check that the weights were actually trained/loaded before saving.",
    ),
    _r(
        "WGT008",
        "info",
        "no weights stored",
        "The file stores no weights for a model whose layers have weights (architecture only, or weights "
        "in a form modelgraph does not read); weight checks are skipped.",
        "Nothing to fix for architecture-only files; otherwise save the weights with the model.",
    ),
    _r(
        "WGT009",
        "error",
        "unreadable weight",
        "A stored weight could not be read while checking its values (truncated data, unsupported dtype, "
        "refused HDF5 feature).",
        "Re-save the weights; check the container with the SEC rules.",
    ),
    _r(
        "WGT010",
        "error",
        "weights member missing",
        "A .keras archive (or unzipped .keras folder) has no model.weights.h5 (nor .npz) although its "
        "layers have weights: Keras's load_model fails on it.",
        "Save the model again with model.save('model.keras'); do not strip members from the archive.",
    ),
    # --- runtime support ---------------------------------------------------------------------------
    _r(
        "RUN001",
        "info",
        "layer not runnable",
        "The NumPy runner has no kernel for this layer class or op (an error with --require-runnable).",
        "Run the model with Keras, or replace the layer with supported ones.",
    ),
    _r(
        "RUN002",
        "info",
        "option not runnable",
        "The NumPy runner supports the layer class but not one of its config values (an error with "
        "--require-runnable).",
        "Use a supported value for the option, or run the model with Keras.",
    ),
    _r(
        "RUN003",
        "info",
        "cannot be planned",
        "The runner could not plan this node (a kernel could not be built, an input is never computed); "
        "an error with --require-runnable.",
        "Read the message; fix the structural or weight findings reported for the same layer first.",
    ),
]


_OWN.append(
    _r(
        "CAT001",
        "info",
        "class unknown to modelgraph",
        "A layer class (or a custom activation or initializer a config names) that modelgraph does not "
        "know: the model reads, draws and validates, but that class has no shape rule, MAC count, NumPy "
        "kernel or ONNX mapping, and convert refuses it unless --keep-unknown.",
        "Describe the class in a plugin and load it with modelgraph --plugin FILE.py (docs/plugins.md); "
        "or convert with --keep-unknown and load the result with your own custom_objects.",
    )
)


def _sec_rules() -> list[Rule]:
    from modelgraph.validate.security.advisories import advisory_ids

    out = []
    for rid, sec in security.SECURITY_RULES.items():
        title = sec.meaning.split(":", 1)[0].split("(", 1)[0].strip()
        meaning = sec.meaning[:1].upper() + sec.meaning[1:] + "."
        advisories = advisory_ids(rid)
        if advisories:
            meaning += f" Keras advisories: {', '.join(advisories)} (docs/security.md)."
        out.append(Rule(rid, "security", sec.severity, title, meaning, sec.hint))
    return out


RULES: dict[str, Rule] = {r.id: r for r in sorted([*_OWN, *_sec_rules()], key=lambda r: r.id)}
"""Every rule by id, sorted by id."""


def rule(rule_id: str) -> Rule:
    """The rule with this id; ``KeyError`` names the families when the id is unknown."""
    try:
        return RULES[rule_id]
    except KeyError:
        raise KeyError(f"unknown rule {rule_id!r}; rule ids start with {sorted(FAMILIES)}") from None


def make_issue(rule_id: str, message: str, where: str, hint: str | None = None, path: str = "") -> Issue:
    """An :class:`Issue` of rule ``rule_id`` with its default severity and (unless given) its hint."""
    r = RULES[rule_id]
    return Issue(rule_id, r.severity, message, where, r.hint if hint is None else hint, path)


def expand_selectors(selectors: list[str] | tuple[str, ...] | None) -> set[str]:
    """Rule ids matched by selectors: an id (``SEC001``), an id prefix (``SEC``, ``SEC1``) or a family
    name (``security``). ``ValueError`` names the selector that matches nothing."""
    out: set[str] = set()
    by_family = {v: k for k, v in FAMILIES.items()}
    for raw in selectors or ():
        sel = raw.strip()
        if not sel:
            continue
        key = by_family.get(sel.lower(), sel.upper())
        if key.upper() == "ALL":
            out.update(RULES)
            continue
        matched = [rid for rid in RULES if rid.startswith(key)]
        if not matched:
            raise ValueError(
                f"unknown rule or family {raw!r}; use a rule id (STR004), a prefix (SEC) or a family "
                f"({', '.join(FAMILIES.values())})"
            )
        out.update(matched)
    return out


def rules_markdown() -> str:
    """``docs/rules.md``: the rule table, generated from :data:`RULES`."""
    lines = [
        "# modelgraph validate: rules",
        "",
        "<!-- Generated by modelgraph.validate.registry.rules_markdown(); do not edit by hand.",
        "     Regenerate with: modelgraph rules --format markdown > docs/rules.md -->",
        "",
        "Every finding of `modelgraph validate` has one of these stable rule ids. Severities are the",
        'defaults; change them with `severity = {RULE = "warning"}` under `[tool.modelgraph]` in',
        "`pyproject.toml` or in `.modelgraph.toml`, and silence rules with `ignore` or",
        "`per-file-ignores` (see the README). `RUN` rules are errors with `--require-runnable`;",
        "`WGT006`/`WGT007` come from the value scan, on by default (`--no-check-values` skips it).",
        "",
        "Exit codes: 0 no error-severity finding (no warning either with `--strict`), 1 findings, 2 usage error.",
        "",
    ]
    for prefix, family in FAMILIES.items():
        lines += [
            f"## {family} (`{prefix}`)",
            "",
            "| id | severity | title | meaning | fix |",
            "|---|---|---|---|---|",
        ]
        for r in RULES.values():
            if r.id.startswith(prefix):
                cells = [r.id, r.severity, r.title, r.meaning, r.hint]
                lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        lines.append("")
    return "\n".join(lines)
