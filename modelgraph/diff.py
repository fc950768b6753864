"""Compare two models: structure, config, wiring, weights and (optionally) outputs.

:func:`diff` aligns the layers of A and B (:mod:`modelgraph.diff_align`: user-given names, then
graph position and config; auto-generated names only as a tie-breaker), then compares each pair:

* **config**: the normalised config (:func:`~modelgraph.diff_align.normalize_config`: no name, no
  envelope keys, DTypePolicy read as its name, floats through float32, Keras 2 spellings mapped to
  Keras 3), one :class:`ConfigChange` per dotted key;
* **wiring**: every call's inputs mapped through the alignment (a renamed producer is not a
  rewiring), and its non-tensor call arguments (``None`` values dropped: Keras 3 records
  ``mask=None``, Keras 2 records nothing);
* **weights**: by canonical weight name: added/removed, shape, dtype, and values with
  ``numpy.isclose(a, b, rtol, atol)`` semantics, reporting max abs, RMS and relative L2 change.

Nested models that pair up are compared recursively (paths like ``inner_model/dense``).
The result is a :class:`GraphDiff`, falsy when the models are identical. A pair whose only
difference is an auto-generated name (``dense_3`` vs ``dense_7``) is not a difference: those
names record session history, not the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from modelgraph._callable_module import make_callable
from modelgraph.diff_align import (
    ConfigContext,
    align,
    canonical_class,
    config_changes,
    is_auto_name,
    is_missing,
    normalize_config,
)
from modelgraph.errors import LoadError
from modelgraph.graph import Layer, ModelGraph, TensorRef
from modelgraph.schemas.diff_report import (
    ConfigChange,
    Counts,
    DiffReport,
    LayerDiff,
    Match,
    ModelChanges,
    ModelSide,
    Options,
    OutputDiff,
    OutputsReport,
    Rename,
    WeightChange,
    WiringChange,
)

DEFAULT_ATOL = 1e-6
DEFAULT_RTOL = 1e-5

# similarity penalties of one matched layer (documented in DiffReport.similarity)
_P_CONFIG, _P_CONFIG_MIN, _P_WIRING, _P_WEIGHTS, _P_RENAME = 0.4, 0.1, 0.3, 0.3, 0.05


@dataclass(frozen=True)
class GraphDiff:
    """The result of :func:`diff`: a :class:`~modelgraph.schemas.diff_report.DiffReport` and the graphs.

    Falsy when the models are identical, so ``if modelgraph.diff(a, b): ...`` reads naturally.
    """

    report: DiffReport
    a: ModelGraph = field(repr=False)
    b: ModelGraph = field(repr=False)

    def __bool__(self) -> bool:
        return not self.report.identical

    @property
    def identical(self) -> bool:
        return self.report.identical

    @property
    def verdict(self) -> str:
        return self.report.verdict

    @property
    def similarity(self) -> float:
        return self.report.similarity

    @property
    def layers(self) -> list[LayerDiff]:
        return self.report.layers

    def changed(self) -> list[str]:
        """Paths (``/``-joined) of every layer that is not unchanged."""
        return ["/".join(e.path) for e in self.report.layers]

    def layer(self, name: str) -> LayerDiff:
        """The entry of one layer, by name or ``/``-joined path (B's name, or A's)."""
        for e in self.report.layers:
            names = {e.name, "/".join(e.path)}
            for p in (e.path_a, e.path_b):
                if p:
                    names.update({p[-1], "/".join(p)})
            if name in names:
                return e
        raise KeyError(f"no changed layer '{name}'; changed layers are {self.changed()}")


def diff(
    a: ModelGraph | str | Path,
    b: ModelGraph | str | Path,
    *,
    weights: bool = True,
    atol: float = DEFAULT_ATOL,
    rtol: float = DEFAULT_RTOL,
    outputs: bool = False,
    seed: int = 0,
    strict_config: bool = False,
) -> GraphDiff:
    """Compare model A with model B (graphs or paths in any format modelgraph reads).

    ``weights=False`` skips weight values and shapes; ``outputs=True`` also runs both models on
    the same random inputs (``seed``) with the NumPy runner and compares the outputs with
    ``atol``/``rtol``. Configs are compared after :func:`~modelgraph.diff_align.normalize_config`
    makes equivalent settings equal; ``strict_config=True`` compares them as written.
    """
    ga = a if isinstance(a, ModelGraph) else _load(a)
    gb = b if isinstance(b, ModelGraph) else _load(b)
    return _Differ(
        ga, gb, weights=weights, atol=atol, rtol=rtol, outputs=outputs, seed=seed, strict_config=strict_config
    ).run()


def input_ranks(graph: ModelGraph) -> dict[tuple[str, ...], int]:
    """The rank of each layer's first input (by layer path, nested layers included), where shape
    inference knows it; empty when inference fails (configs are then compared without it)."""
    try:
        from modelgraph.shapes import infer_shapes

        result = infer_shapes(graph)
    except Exception:  # noqa: BLE001 - axis normalisation is an improvement, never a requirement
        return {}
    ranks: dict[tuple[str, ...], int] = {}
    stack = [(graph, result, ())]
    while stack:
        g, res, prefix = stack.pop()
        for layer in g.layers:
            shapes = res.inputs.get((layer.name, 0)) or []
            if shapes and isinstance(shapes[0], list | tuple):
                ranks[(*prefix, layer.name)] = len(shapes[0])
            if layer.subgraph is not None and (layer.name, 0) in res.nested:
                stack.append((layer.subgraph, res.nested[(layer.name, 0)], (*prefix, layer.name)))
    return ranks


def _load(path: str | Path) -> ModelGraph:
    from modelgraph.loading import load

    return load(path)


def _walk_count(g: ModelGraph) -> int:
    return sum(1 for _ in g.walk())


def _own_params(layer: Layer) -> int:
    return sum(w.size for w in layer.own_weights)


def _jsonable(value: Any) -> Any:
    if isinstance(value, TensorRef):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not np.isfinite(value):
        return str(value)
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


def _call_kwargs(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Non-tensor call arguments in one spelling: ``None`` and tensors dropped."""

    def has_tensor(v: Any) -> bool:
        if isinstance(v, TensorRef):
            return True
        if isinstance(v, Mapping):
            return any(has_tensor(x) for x in v.values())
        if isinstance(v, list | tuple):
            return any(has_tensor(x) for x in v)
        return False

    # tensors are compared as inputs (Keras 2 passes MultiHeadAttention's value as a kwarg, Keras 3
    # positionally); ``training=False`` is the inference default Keras 3 records and Keras 2 does not
    return {
        str(k): _jsonable(v)
        for k, v in sorted(kwargs.items(), key=lambda kv: str(kv[0]))
        if v is not None and not has_tensor(v) and not (k == "training" and v is False)
    }


def _prints_the_same(old: Any, new: Any) -> bool:
    """Whether two config values would be shown identically (``1`` and ``1.0`` print differently;
    a list and a tuple, or two objects whose only difference is key order, do not): such a change
    would be noise the reader cannot see."""
    if is_missing(old) or is_missing(new):
        return False
    import json

    def text(value: Any) -> str:
        return json.dumps(_jsonable(value), sort_keys=True, default=str)

    return text(old) == text(new)


def _fmt_params(n: int | None) -> str:
    return "?" if n is None else f"{n:,}"


class _Differ:
    def __init__(
        self,
        ga: ModelGraph,
        gb: ModelGraph,
        *,
        weights: bool,
        atol: float,
        rtol: float,
        outputs: bool,
        seed: int,
        strict_config: bool = False,
    ) -> None:
        self.ga, self.gb = ga, gb
        self.strict_config = strict_config
        self.ranks_a = {} if strict_config else input_ranks(ga)
        self.ranks_b = {} if strict_config else input_ranks(gb)
        self.atol, self.rtol = float(atol), float(rtol)
        self.outputs, self.seed = outputs, seed
        self.notes: list[str] = []
        self.compare_weights = weights
        if weights:
            missing = [
                f"{side} ({g.source or g.name})" for side, g in (("A", ga), ("B", gb)) if not g.has_weights
            ]
            if missing:
                self.compare_weights = False
                self.notes.append(f"weights not compared: {' and '.join(missing)} has no weights")
        self.entries: list[LayerDiff] = []
        self.matches: list[Match] = []
        self.sim_sum = 0.0
        self.counts: dict[str, int] = dict.fromkeys(
            (
                "matched",
                "unchanged",
                "added",
                "removed",
                "renamed",
                "auto_renamed",
                "config_changed",
                "rewired",
                "weights_changed",
            ),
            0,
        )
        self.top_a2b: dict[str, str] = {}

    # --- driver ---------------------------------------------------------------------------------
    def run(self) -> GraphDiff:
        model_changes, _ = self._level(self.ga, self.gb, (), ())
        ga, gb = self.ga, self.gb
        if ga.name != gb.name:
            auto = is_auto_name(ga.name, ga.class_name) and is_auto_name(gb.name, gb.class_name)
            model_changes.rename = Rename(old=ga.name, new=gb.name, auto=auto)
        if canonical_class(ga.class_name) != canonical_class(gb.class_name):
            model_changes.old_class_name, model_changes.new_class_name = ga.class_name, gb.class_name
        model_diff = any(
            [
                model_changes.old_inputs is not None,
                model_changes.old_outputs is not None,
                model_changes.rename is not None and not model_changes.rename.auto,
                model_changes.old_class_name is not None,
            ]
        )
        outputs_report = self._outputs() if self.outputs else None
        n_a, n_b = _walk_count(ga), _walk_count(gb)
        similarity = 1.0 if n_a + n_b == 0 else round(2.0 * self.sim_sum / (n_a + n_b), 6)
        identical = not self.entries and not model_diff and (outputs_report is None or outputs_report.equal)
        if identical and (n_a != n_b):  # pragma: no cover - every unpaired layer makes an entry
            identical = False
        pa = ga.param_count if ga.has_weights else None
        pb = gb.param_count if gb.has_weights else None
        c = self.counts
        report = DiffReport(
            tool_version=_version(),
            a=_side(ga),
            b=_side(gb),
            options=Options(
                weights=self.compare_weights,
                atol=self.atol,
                rtol=self.rtol,
                outputs=self.outputs,
                seed=self.seed,
            ),
            identical=identical,
            verdict=self._verdict(identical, model_changes, outputs_report, similarity, pa, pb, n_a),
            similarity=similarity,
            params_a=pa,
            params_b=pb,
            params_delta=None if pa is None or pb is None else pb - pa,
            counts=Counts(layers_a=n_a, layers_b=n_b, **c),
            model=model_changes if model_changes.model_dump(exclude_none=True) else None,
            layers=self.entries,
            alignment=self.matches,
            outputs=outputs_report,
            notes=self.notes,
        )
        return GraphDiff(report, ga, gb)

    def _verdict(
        self,
        identical: bool,
        model: ModelChanges,
        outputs: OutputsReport | None,
        similarity: float,
        pa: int | None,
        pb: int | None,
        n_a: int,
    ) -> str:
        c = self.counts
        if identical:
            parts = [f"identical: {n_a} layers" + (f", {_fmt_params(pa)} params" if pa is not None else "")]
            if self.compare_weights:
                parts.append(f"weights equal within atol={self.atol:g}, rtol={self.rtol:g}")
            else:
                parts.append("weights not compared")
            if outputs is not None:
                parts.append("outputs equal")
            if c["auto_renamed"]:
                parts.append(f"{c['auto_renamed']} auto-generated name(s) renumbered")
            return "; ".join(parts)
        bits = []
        for key, label in (
            ("added", "added"),
            ("removed", "removed"),
            ("renamed", "renamed"),
            ("config_changed", "config changed"),
            ("rewired", "rewired"),
            ("weights_changed", "weights changed"),
        ):
            if c[key]:
                bits.append(f"{c[key]} {label}")
        if model.old_inputs is not None or model.old_outputs is not None:
            bits.append("model inputs/outputs changed")
        if model.rename is not None and not model.rename.auto:
            bits.append(f"model renamed {model.rename.old} -> {model.rename.new}")
        if model.old_class_name is not None:
            bits.append(f"model class {model.old_class_name} -> {model.new_class_name}")
        if outputs is not None and not outputs.equal:
            worst = max((o.max_abs or 0.0 for o in outputs.outputs), default=0.0)
            bits.append(f"outputs differ (max abs {worst:.3g})")
        if pa is None or pb is None:
            params = "params not compared"
        else:
            delta = pb - pa
            params = (
                f"params {delta:+,} ({_fmt_params(pa)} -> {_fmt_params(pb)})" if delta else "params unchanged"
            )
        return f"different: {', '.join(bits) or 'see layers'}; {params}; similarity {similarity:.3f}"

    # --- one nesting level ------------------------------------------------------------------------
    def _level(
        self, ga: ModelGraph, gb: ModelGraph, pre_a: tuple[str, ...], pre_b: tuple[str, ...]
    ) -> tuple[ModelChanges, dict[str, str]]:
        pairs, only_a, only_b = align(ga, gb)
        a2b = {p.a.name: p.b.name for p in pairs}
        if not pre_a:
            self.top_a2b = a2b
        for p in pairs:
            path_a, path_b = (*pre_a, p.a.name), (*pre_b, p.b.name)
            self.matches.append(
                Match(a=list(path_a), b=list(path_b), class_name=p.b.class_name, matched_by=p.by)  # type: ignore[arg-type]
            )
            self.counts["matched"] += 1
            entry, sim = self._pair(ga, gb, p.a, p.b, p.by, a2b, path_a, path_b)
            pos = len(self.entries)
            if p.a.subgraph is not None and p.b.subgraph is not None:
                sub_changes, _ = self._level(p.a.subgraph, p.b.subgraph, path_a, path_b)
                extra = self._io_config_changes(sub_changes)
                if extra:
                    if entry is None:
                        entry = self._new_entry(p.a, p.b, p.by, path_a, path_b)
                    if not entry.config:
                        self.counts["config_changed"] += 1
                    entry.config.extend(extra)
                    sim = max(0.0, sim - _P_CONFIG_MIN)
            if entry is not None:
                entry.similarity = round(sim, 6)
                entry.marker = _marker(entry)
                self.entries.insert(pos, entry)
            else:
                self.counts["unchanged"] += 1
            self.sim_sum += sim
        for lyr in only_b:
            self._unpaired(lyr, pre_b, "added")
        for lyr in only_a:
            self._unpaired(lyr, pre_a, "removed")
        return self._io_changes(ga, gb, a2b), a2b

    @staticmethod
    def _io_config_changes(ch: ModelChanges) -> list[ConfigChange]:
        out = []
        if ch.old_inputs is not None:
            out.append(ConfigChange(key="inputs", old=ch.old_inputs, new=ch.new_inputs))
        if ch.old_outputs is not None:
            out.append(ConfigChange(key="outputs", old=ch.old_outputs, new=ch.new_outputs))
        return out

    @staticmethod
    def _io_changes(ga: ModelGraph, gb: ModelGraph, a2b: dict[str, str]) -> ModelChanges:
        changes = ModelChanges()

        def mapped(refs: tuple[TensorRef, ...]) -> list[tuple[str | None, int, int]]:
            return [(a2b.get(r.layer), r.node_index, r.tensor_index) for r in refs]

        def plain(refs: tuple[TensorRef, ...]) -> list[tuple[str | None, int, int]]:
            return [(r.layer, r.node_index, r.tensor_index) for r in refs]

        if mapped(ga.inputs) != plain(gb.inputs):
            changes.old_inputs = [str(r) for r in ga.inputs]
            changes.new_inputs = [str(r) for r in gb.inputs]
        if mapped(ga.outputs) != plain(gb.outputs):
            changes.old_outputs = [str(r) for r in ga.outputs]
            changes.new_outputs = [str(r) for r in gb.outputs]
        return changes

    def _new_entry(
        self, la: Layer, lb: Layer, by: str, path_a: tuple[str, ...], path_b: tuple[str, ...]
    ) -> LayerDiff:
        return LayerDiff(
            status="changed",
            marker="~",
            name=lb.name,
            path=list(path_b),
            path_a=list(path_a),
            path_b=list(path_b),
            class_name=lb.class_name,
            matched_by=by,  # type: ignore[arg-type]
            old_params=_own_params(la),
            new_params=_own_params(lb),
            similarity=1.0,
        )

    def _unpaired(self, layer: Layer, prefix: tuple[str, ...], status: str) -> None:
        graph_walk = [((*prefix, layer.name), layer)]
        if layer.subgraph is not None:
            graph_walk += [((*prefix, *p), lyr) for p, lyr in layer.subgraph.walk((layer.name,))]
        for path, lyr in graph_walk:
            added = status == "added"
            self.counts[status] += 1
            self.entries.append(
                LayerDiff(
                    status=status,  # type: ignore[arg-type]
                    marker="+" if added else "-",
                    name=lyr.name,
                    path=list(path),
                    path_a=None if added else list(path),
                    path_b=list(path) if added else None,
                    class_name=lyr.class_name,
                    old_params=None if added else _own_params(lyr),
                    new_params=_own_params(lyr) if added else None,
                    similarity=0.0,
                )
            )

    # --- one pair -------------------------------------------------------------------------------
    def _pair(
        self,
        ga: ModelGraph,
        gb: ModelGraph,
        la: Layer,
        lb: Layer,
        by: str,
        a2b: dict[str, str],
        path_a: tuple[str, ...],
        path_b: tuple[str, ...],
    ) -> tuple[LayerDiff | None, float]:
        sim = 1.0
        rename: Rename | None = None
        if la.name != lb.name:
            auto = is_auto_name(la.name, la.class_name, la.config) and is_auto_name(
                lb.name, lb.class_name, lb.config
            )
            rename = Rename(old=la.name, new=lb.name, auto=auto)
            if auto:
                self.counts["auto_renamed"] += 1
            else:
                self.counts["renamed"] += 1
                sim -= _P_RENAME
        # config
        na = normalize_config(la, self._context(self.ga, self.ranks_a, path_a))
        nb = normalize_config(lb, self._context(self.gb, self.ranks_b, path_b))
        cfg = [
            ConfigChange(
                key=k,
                old=None if is_missing(o) else _jsonable(o),
                new=None if is_missing(n) else _jsonable(n),
                only_in="b" if is_missing(o) else "a" if is_missing(n) else None,
            )
            for k, o, n in config_changes(na, nb)
            if self.strict_config or not _prints_the_same(o, n)
        ]
        if cfg:
            self.counts["config_changed"] += 1
            frac = len({c.key.split(".", 1)[0] for c in cfg}) / max(1, len(set(na) | set(nb)))
            sim -= max(_P_CONFIG_MIN, _P_CONFIG * frac)
        # wiring
        wiring = self._wiring(ga, gb, la, lb, a2b)
        if wiring:
            self.counts["rewired"] += 1
            sim -= _P_WIRING
        # weights
        wchanges: list[WeightChange] = []
        if self.compare_weights:
            wchanges, compared = self._weights(la, lb)
            if wchanges:
                self.counts["weights_changed"] += 1
                sim -= _P_WEIGHTS * len(wchanges) / max(1, compared)
        if not cfg and not wiring and not wchanges and (rename is None or rename.auto):
            return None, max(0.0, sim)
        entry = self._new_entry(la, lb, by, path_a, path_b)
        entry.rename = rename
        entry.config = cfg
        entry.wiring = wiring
        entry.weights = wchanges
        return entry, max(0.0, sim)

    def _context(
        self, graph: ModelGraph, ranks: dict[tuple[str, ...], int], path: tuple[str, ...]
    ) -> ConfigContext:
        return ConfigContext(
            input_rank=ranks.get(path), keras_version=graph.keras_version, strict=self.strict_config
        )

    @staticmethod
    def _wiring(
        ga: ModelGraph, gb: ModelGraph, la: Layer, lb: Layer, a2b: dict[str, str]
    ) -> list[WiringChange]:
        nodes_a, nodes_b = ga.nodes_of(la.name), gb.nodes_of(lb.name)
        out: list[WiringChange] = []
        for i in range(max(len(nodes_a), len(nodes_b))):
            na = nodes_a[i] if i < len(nodes_a) else None
            nb = nodes_b[i] if i < len(nodes_b) else None
            if na is None or nb is None:
                out.append(
                    WiringChange(
                        node=i,
                        old=None if na is None else [str(r) for r in na.inputs],
                        new=None if nb is None else [str(r) for r in nb.inputs],
                    )
                )
                continue
            mapped = [(a2b.get(r.layer), r.node_index, r.tensor_index) for r in na.inputs]
            plain = [(r.layer, r.node_index, r.tensor_index) for r in nb.inputs]
            ka, kb = _call_kwargs(na.kwargs), _call_kwargs(nb.kwargs)
            if mapped != plain or ka != kb:
                ch = WiringChange(node=i, old=[str(r) for r in na.inputs], new=[str(r) for r in nb.inputs])
                if ka != kb:
                    ch.old_kwargs, ch.new_kwargs = _jsonable(ka), _jsonable(kb)
                out.append(ch)
        return out

    def _weights(self, la: Layer, lb: Layer) -> tuple[list[WeightChange], int]:
        wa: dict[str, Any] = {}
        for w in la.own_weights:  # a nested model's weights are compared layer by layer inside it
            wa.setdefault(w.name, w)
        wb: dict[str, Any] = {}
        for w in lb.own_weights:
            wb.setdefault(w.name, w)
        names = list(wa) + [n for n in wb if n not in wa]
        # a weight whose canonical name differs (an unnamed Keras 3 variable ``vars:var_2`` vs the
        # legacy h5 ``kernel_scale``) pairs with the one at the same position when shapes agree
        pos_a = {w.name: i for i, w in enumerate(la.own_weights)}
        pos_b = {i: w for i, w in enumerate(lb.own_weights)}
        by_position: dict[str, str] = {}
        for name in [n for n in wa if n not in wb]:
            y = pos_b.get(pos_a[name])
            if y is not None and y.name not in wa and tuple(y.shape) == tuple(wa[name].shape):
                by_position[name] = y.name
        if by_position:
            names = [n for n in names if n not in by_position.values()]
            pairs_txt = ", ".join(f"'{k}' ~ '{v}'" for k, v in by_position.items())
            self.notes.append(f"{lb.name}: weights paired by position (names differ): {pairs_txt}")
        out: list[WeightChange] = []
        for name in names:
            x, y = wa.get(name), wb.get(by_position.get(name, name))
            if x is None:
                out.append(
                    WeightChange(name=name, status="added", new_shape=list(y.shape), new_dtype=y.dtype)
                )
            elif y is None:
                out.append(
                    WeightChange(name=name, status="removed", old_shape=list(x.shape), old_dtype=x.dtype)
                )
            elif tuple(x.shape) != tuple(y.shape):
                out.append(
                    WeightChange(
                        name=name,
                        status="shape",
                        old_shape=list(x.shape),
                        new_shape=list(y.shape),
                        old_dtype=x.dtype,
                        new_dtype=y.dtype,
                    )
                )
            else:
                change = self._values(name, x, y)
                if change is not None:
                    out.append(change)
        return out, len(names)

    def _values(self, name: str, x: Any, y: Any) -> WeightChange | None:
        try:
            a = np.asarray(x.read())
            b = np.asarray(y.read())
        except LoadError as exc:
            self.notes.append(f"weight values not compared: {exc}")
            return None
        dtype_changed = x.dtype != y.dtype
        stats = _value_stats(a, b, self.atol, self.rtol)
        if not stats["mismatched"] and not dtype_changed:
            return None
        return WeightChange(
            name=name,
            status="values" if stats["mismatched"] else "dtype",
            old_shape=list(x.shape),
            new_shape=list(y.shape),
            old_dtype=x.dtype,
            new_dtype=y.dtype,
            **stats,
        )

    # --- outputs ----------------------------------------------------------------------------------
    def _outputs(self) -> OutputsReport:
        from modelgraph.runner.feeds import random_feeds
        from modelgraph.runner.interpreter import Runner

        ra, rb = Runner(self.ga), Runner(self.gb)
        feeds_a = random_feeds(ra.inputs, self.ga, seed=self.seed)
        feeds_b: dict[str, np.ndarray] = {}
        for spec_a, spec_b in zip(ra.inputs, rb.inputs, strict=False):
            name_b = self.top_a2b.get(spec_a.name, spec_b.name)
            feeds_b[name_b] = feeds_a[spec_a.name]
        out_a = ra.run(feeds_a)
        out_b = rb.run(feeds_b)
        items_a, items_b = list(out_a.items()), list(out_b.items())
        diffs: list[OutputDiff] = []
        for i, (ka, va) in enumerate(items_a):
            if i >= len(items_b):
                diffs.append(
                    OutputDiff(name_a=ka, name_b=None, shape_a=list(np.shape(va)), shape_b=None, equal=False)
                )
                continue
            kb, vb = items_b[i]
            va, vb = np.asarray(va), np.asarray(vb)
            if va.shape != vb.shape:
                diffs.append(
                    OutputDiff(
                        name_a=ka, name_b=kb, shape_a=list(va.shape), shape_b=list(vb.shape), equal=False
                    )
                )
                continue
            stats = _value_stats(va, vb, self.atol, self.rtol)
            diffs.append(
                OutputDiff(
                    name_a=ka,
                    name_b=kb,
                    shape_a=list(va.shape),
                    shape_b=list(vb.shape),
                    equal=stats["mismatched"] == 0,
                    **stats,
                )
            )
        if len(items_b) > len(items_a):
            for kb, vb in items_b[len(items_a) :]:
                diffs.append(
                    OutputDiff(name_a="", name_b=kb, shape_a=[], shape_b=list(np.shape(vb)), equal=False)
                )
        return OutputsReport(
            seed=self.seed,
            inputs={k: list(v.shape) for k, v in feeds_a.items()},
            outputs=diffs,
            equal=all(d.equal for d in diffs),
        )


def _value_stats(a: np.ndarray, b: np.ndarray, atol: float, rtol: float) -> dict[str, Any]:
    """max abs, RMS and relative L2 of ``b - a``, and how many elements fail ``isclose(a, b)``."""
    if a.dtype.kind in "biuf" and b.dtype.kind in "biuf":
        fa, fb = a.astype(np.float64), b.astype(np.float64)
    else:  # strings, objects: equal or not
        neq = int(np.sum(a != b))
        return {"size": int(a.size), "mismatched": neq, "max_abs": None, "rms": None, "rel": None}
    close = np.isclose(fa, fb, rtol=rtol, atol=atol, equal_nan=True)
    mismatched = int(close.size - np.count_nonzero(close))
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.abs(fb - fa)
        finite = np.isfinite(d)
        d0 = np.where(finite, d, 0.0)
        max_abs = float(d0.max()) if d0.size else 0.0
        rms = float(np.sqrt(np.mean(d0**2))) if d0.size else 0.0
        norm_a = float(np.linalg.norm(np.where(np.isfinite(fa), fa, 0.0)))
        norm_d = float(np.linalg.norm(d0))
    rel = norm_d / norm_a if norm_a > 0 else (0.0 if norm_d == 0 else float("inf"))
    return {"size": int(a.size), "mismatched": mismatched, "max_abs": max_abs, "rms": rms, "rel": rel}


def _marker(entry: LayerDiff) -> str:
    if entry.status == "added":
        return "+"
    if entry.status == "removed":
        return "-"
    m = ""
    if entry.config or entry.wiring or (entry.rename and not entry.rename.auto):
        m += "~"
    if entry.weights:
        m += "!"
    return m or "~"


def _side(g: ModelGraph) -> ModelSide:
    return ModelSide(
        source=str(g.source),
        format=g.format,
        keras_version=g.keras_version,
        name=g.name,
        class_name=g.class_name,
        layers=_walk_count(g),
        params=g.param_count if g.has_weights else None,
        has_weights=g.has_weights,
    )


def _version() -> str:
    from modelgraph._version import __version__

    return __version__


# --- a drawing of the diff ----------------------------------------------------------------------

_DIFF_COLORS = {
    "added": ("#c8e6c9", "#2e7d32"),
    "removed": ("#ffcdd2", "#c62828"),
    "changed": ("#ffe0b2", "#ef6c00"),
    "same": ("#ffffff", "#555555"),
}


def _dq(text: str) -> str:
    """A DOT double-quoted string (layer names are untrusted: quotes, backslashes, newlines escaped)."""
    out = text.replace("\\", "\\\\").replace('"', '\\"').replace("\r", " ").replace("\n", "\\n")
    return f'"{out}"'


DIFF_LEGEND = [
    {"label": "added (only in B)", "fill": _DIFF_COLORS["added"][0], "color": _DIFF_COLORS["added"][1]},
    {"label": "removed (only in A)", "fill": _DIFF_COLORS["removed"][0], "color": _DIFF_COLORS["removed"][1]},
    {"label": "changed", "fill": _DIFF_COLORS["changed"][0], "color": _DIFF_COLORS["changed"][1]},
    {"label": "unchanged", "fill": _DIFF_COLORS["same"][0], "color": _DIFF_COLORS["same"][1]},
    {"label": "edge only in A", "edge": "#c62828", "dashed": True},
    {"label": "edge only in B", "edge": "#2e7d32"},
]
"""What the colours of :func:`to_dot` mean (the HTML view's legend)."""


def to_dot(gd: GraphDiff) -> str:
    """One graph of A and B together (top level): added layers green, removed red, changed amber.

    Edges only in A are red and dashed, edges only in B green; a nested model is amber when any
    layer inside it changed.
    """
    return to_dot_with_ids(gd)[0]


def to_dot_with_ids(gd: GraphDiff) -> tuple[str, dict[str, tuple[tuple[str, str], str]], Any]:
    """:func:`to_dot`; per drawn node id, its key (``("p", b_name)`` for a pair, ``("a", name)``
    / ``("b", name)`` for a layer of one side) and status (added, removed, changed, same); and the
    same drawing as a :class:`modelgraph.render.DotGraph` with node styles (the HTML view's SVG)."""
    from modelgraph.render import DotGraph, NodeStyle, html_escape

    rep = gd.report
    top_pairs = {m.a[0]: m.b[0] for m in rep.alignment if len(m.a) == 1}
    b2a = {b: a for a, b in top_pairs.items()}
    status_b: dict[str, str] = {}
    status_a: dict[str, str] = {}
    labels: dict[str, str] = {}
    for e in rep.layers:
        if e.status == "added":
            status_b.setdefault(e.path[0], "added" if len(e.path) == 1 else "changed")
        elif e.status == "removed":
            status_a.setdefault(e.path[0], "removed" if len(e.path) == 1 else "changed")
        else:
            top_b = (e.path_b or e.path)[0]
            status_b[top_b] = "changed"
            if len(e.path) == 1 and e.rename is not None:
                labels[top_b] = f"{e.rename.old} → {e.rename.new}"
    # node ids: paired and B-only layers by B's name, A-only layers by A's name; a layer called
    # several times (on either side) is drawn once per call, as render does, so the drawing stays a
    # DAG (one box per layer turns x -> shared -> add -> shared into a cycle)
    ids: dict[tuple[str, str, int], str] = {}
    drawn: dict[str, tuple[tuple[str, str], str]] = {}
    styles: dict[str, Any] = {}
    edge_list: list[tuple[str, str, str]] = []
    edge_colors: dict[tuple[str, str], tuple[str, bool]] = {}
    calls: dict[tuple[str, str], int] = {}
    lines = [
        "digraph modelgraph_diff {",
        "  rankdir=TB;",
        '  node [shape=box style="rounded,filled" fontname="Helvetica" fontsize=10];',
        '  edge [arrowsize=0.6 color="#555555"];',
        f"  label={_dq(rep.verdict)}; labelloc=t; fontname=Helvetica; fontsize=11;",
    ]

    def node(key: tuple[str, str], count: int, layer: Layer, status: str, label: str | None = None) -> None:
        calls[key] = max(count, 1)
        fill, border = _DIFF_COLORS[status]
        for call in range(calls[key]):
            ident = f"n{len(ids)}"
            ids[(*key, call)] = ident
            drawn[ident] = (key, status)
            text = f"{label or layer.name}\n{layer.class_name}"
            markup = f"<B>{html_escape(label or layer.name)}</B><BR/>{html_escape(layer.class_name)}"
            if calls[key] > 1:
                text += f"\ncall {call + 1}/{calls[key]}"
                markup += f"<BR/><FONT POINT-SIZE='9'>call {call + 1}/{calls[key]}</FONT>"
            styles[ident] = NodeStyle(markup, "box", fill, border, None if status == "same" else 2.0)
            lines.append(
                f'  {ident} [label={_dq(text)} fillcolor="{fill}" color="{border}" penwidth={1 if status == "same" else 2}];'
            )

    for name in layer_order_of(gd.b):
        if name in b2a:
            count = max(gd.b.layer(name).node_count, gd.a.layer(b2a[name]).node_count)
            node(("p", name), count, gd.b.layer(name), status_b.get(name, "same"), labels.get(name))
        else:
            node(("b", name), gd.b.layer(name).node_count, gd.b.layer(name), "added")
    for name in layer_order_of(gd.a):
        if name not in top_pairs:
            node(("a", name), gd.a.layer(name).node_count, gd.a.layer(name), "removed")

    def key_a(name: str) -> tuple[str, str]:
        return ("p", top_pairs[name]) if name in top_pairs else ("a", name)

    def key_b(name: str) -> tuple[str, str]:
        return ("p", name) if name in b2a else ("b", name)

    def at(key: tuple[str, str], call: int) -> tuple[str, str, int]:
        return (*key, call if calls.get(key, 1) > 1 else 0)

    def edges(g: ModelGraph, key: Any) -> set[tuple[tuple[str, str, int], tuple[str, str, int]]]:
        return {
            (at(key(r.layer), r.node_index), at(key(n.layer), n.index))
            for n in g.nodes
            for r in n.inputs
            if g.has_layer(r.layer)
        }

    ea, eb = edges(gd.a, key_a), edges(gd.b, key_b)
    for src, dst in sorted(ea | eb):
        if src not in ids or dst not in ids:
            continue
        style = (
            ""
            if (src, dst) in ea and (src, dst) in eb
            else (
                ' [color="#c62828" style=dashed]' if (src, dst) in ea else ' [color="#2e7d32" penwidth=1.6]'
            )
        )
        lines.append(f"  {ids[src]} -> {ids[dst]}{style};")
        edge_list.append((ids[src], ids[dst], ""))
        if style:
            edge_colors[(ids[src], ids[dst])] = ("#c62828", True) if (src, dst) in ea else ("#2e7d32", False)
    lines.append("}")
    source = "\n".join(lines) + "\n"
    drawing = DotGraph(
        source=source,
        nodes=len(ids),
        edges=len(edge_list),
        clusters=0,
        node_styles=styles,
        edge_list=tuple(edge_list),
        edge_colors=edge_colors,
        title=html_escape(rep.verdict),
    )
    return source, drawn, drawing


def layer_order_of(graph: ModelGraph) -> list[str]:
    from modelgraph.diff_align import layer_order

    return layer_order(graph)


def render_diff(gd: GraphDiff, output: str | Path) -> bytes:
    """Write :func:`to_dot` to ``output``: ``.dot``/``.gv`` as text, ``.svg``/``.png``/``.pdf`` through Graphviz."""
    from modelgraph.errors import ToolMissingError, UsageError

    source = to_dot(gd)
    suffix = Path(output).suffix.lower().lstrip(".")
    fmt = "dot" if suffix in ("dot", "gv") else suffix
    if fmt not in ("dot", "svg", "png", "pdf"):
        raise UsageError(f"cannot tell the format from {str(output)!r}; use a .svg, .png, .pdf or .dot name")
    if fmt == "dot":
        payload = source.encode("utf-8")
    else:
        import shutil

        if shutil.which("dot") is None:
            raise ToolMissingError(
                "Graphviz 'dot' was not found on PATH; install Graphviz (apt install graphviz, brew install "
                f"graphviz) or write {Path(output).with_suffix('.dot').name} instead"
            )
        import graphviz

        try:
            payload = graphviz.Source(source).pipe(format=fmt)
        except graphviz.ExecutableNotFound as exc:
            raise ToolMissingError("Graphviz 'dot' could not be started") from exc
    Path(output).write_bytes(payload)
    return payload


make_callable(__name__, __name__, "diff")
