"""``save(graph, path)``: write a model as a Keras 3 ``.keras`` or a legacy ``.h5``, or refuse it whole."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from modelgraph.errors import NotConvertibleError, UsageError
from modelgraph.graph import ModelGraph
from modelgraph.loading.training import TRAINING_KEY
from modelgraph.saving.archive import write_atomically, zip_bytes
from modelgraph.saving.keras3_config import ConfigWriter, Refusal
from modelgraph.saving.keras3_weights import layer_tree, write_weights_h5
from modelgraph.saving.security_gate import refuse_unsafe_input
from modelgraph.saving.training import training_state
from modelgraph.saving.upgrades import NotConvertible, UpgradeContext
from modelgraph.shapes import infer_shapes

# The Keras version whose format the writer produces (and whose loader verified the samples).
TARGET_KERAS_VERSION = "3.15.1"
# A fixed save date keeps the bytes deterministic (Keras reads only keras_version from metadata).
FIXED_DATE = "1980-01-01@00:00:00"
SUFFIXES = (".keras", ".h5", ".hdf5")
LEGACY_SUFFIXES = (".h5", ".hdf5")


@dataclass
class SaveReport:
    """What was written: the path, its sha256, and notes on everything the conversion changed."""

    path: Path
    sha256: str
    notes: list[str] = field(default_factory=list)


def save(graph: ModelGraph, path: str | Path, strip: bool = False, keep_unknown: bool = False) -> SaveReport:
    """Write ``graph`` to ``path`` (``.keras``: Keras 3 archive; ``.h5``: legacy HDF5 for tf_keras and Keras 3).

    Nothing is written when any layer cannot be converted faithfully (:class:`NotConvertibleError`
    names every such layer) or when the input files carry an error-severity security finding
    (:class:`~modelgraph.errors.SecurityRefusedError`, :mod:`modelgraph.saving.security_gate`). The file is written to a temporary file and renamed, and the same graph
    always gives the same bytes. ``strip`` drops the training configuration; optimizer state is
    never carried (see ``docs/writing.md``). ``keep_unknown`` writes classes the catalogue does not
    know as the file had them, for loading with the user's ``custom_objects`` (docs/plugins.md).
    """
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix not in SUFFIXES:
        raise UsageError(f"output '{target}' must end in .keras or .h5 (got '{suffix or 'no suffix'}')")
    refuse_unsafe_input(graph, target)
    notes = _notes(graph)
    if suffix in LEGACY_SUFFIXES:
        from modelgraph.saving.legacy_h5 import legacy_h5_bytes

        data = legacy_h5_bytes(graph, str(target), keep_unknown=keep_unknown)
        if graph.metadata.get(TRAINING_KEY) is not None:
            notes.append(
                "the training config and optimizer state are not written to .h5; the model loads uncompiled"
            )
    else:
        data, training_notes = keras_bytes(graph, str(target), strip=strip, keep_unknown=keep_unknown)
        notes.extend(training_notes)
    write_atomically(target, data)
    return SaveReport(target, hashlib.sha256(data).hexdigest(), notes)


def keras_bytes(
    graph: ModelGraph, target: str = "the model", strip: bool = False, keep_unknown: bool = False
) -> tuple[bytes, list[str]]:
    """The bytes of a Keras 3 ``.keras`` archive for ``graph`` (refusing it whole when needed) and
    notes on its training state: the ``compile_config`` and optimizer variables are carried unless
    ``strip`` (:mod:`modelgraph.saving.training`)."""
    writer = ConfigWriter(
        UpgradeContext(graph.keras_version, rescale_hard_sigmoid=True), keep_unknown=keep_unknown
    )
    config = writer.model(graph, infer_shapes(graph))
    refusals = list(writer.refusals)
    try:
        entries = list(layer_tree(graph, writer.written, orders=writer.orders))
    except NotConvertible as exc:
        refusals.append(Refusal(graph.name, graph.class_name, str(exc)))
        entries = []
    if refusals:
        raise NotConvertibleError(target, refusals)
    if entries and not graph.has_weights and any(e.arrays for e in entries):
        raise NotConvertibleError(
            target,
            [Refusal(graph.name, graph.class_name, "the model has no weights: attach them with --weights")],
        )
    record = graph.metadata.get(TRAINING_KEY)
    state = training_state(None if strip else record, [w for e in entries for _, w in e.arrays])
    notes = list(state.notes)
    if record is not None and strip:
        notes.append("the training config and optimizer state are dropped (--strip)")
    elif (
        record is not None
        and state.compile_config is not None
        and state.optimizer_variables is None
        and not notes
    ):
        notes.append("the model loads compiled, with a fresh optimizer state")
    if state.compile_config is not None:
        config["compile_config"] = state.compile_config
    optimizer = None
    if state.optimizer_variables is not None:
        optimizer = (state.optimizer_name or "optimizer", state.optimizer_variables)
    metadata = {"keras_version": TARGET_KERAS_VERSION, "date_saved": FIXED_DATE}
    members = [
        ("metadata.json", json.dumps(metadata).encode()),
        ("config.json", json.dumps(config).encode()),
        ("model.weights.h5", write_weights_h5(graph, entries, optimizer)),
    ]
    return zip_bytes(members), notes


def _notes(graph: ModelGraph) -> list[str]:
    notes = []
    if graph.format == "tfjs_layers" and _tfjs_quantized(graph):
        notes.append("TF.js quantized weights are written dequantized (float32), as modelgraph reads them")
    return notes


def _tfjs_quantized(graph: ModelGraph) -> bool:
    """Whether the TF.js manifest the graph came from stores any weight quantized."""
    from modelgraph.loading.files import read_json_file

    try:
        manifest = read_json_file(Path(graph.source))
    except Exception:  # noqa: BLE001 - a note only; the graph was already read from this file
        return False
    groups = manifest.get("weightsManifest") if isinstance(manifest, dict) else None
    for group in groups if isinstance(groups, list) else []:
        for entry in group.get("weights", []) if isinstance(group, dict) else []:
            if isinstance(entry, dict) and entry.get("quantization"):
                return True
    return False
