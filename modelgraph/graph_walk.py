"""The one walk over a model graph: nodes in order, nested models inlined, shared calls, input binding.

Like Keras's ``Functional._run_through_graph(operation_fn)`` and torch.fx's ``Interpreter.run_node``,
:class:`GraphWalker` visits every node of a graph in its topological order and leaves what a node
*means* to its clients, which override :meth:`GraphWalker.run_node`. What every client needs is
done here, once:

* **nested models are inlined**: a call of a nested model binds the nested model's inputs to the
  caller's values (by key for a mapping, else flattened in order, as Keras does), walks the nested
  graph with the path prefix ``outer/`` (``outer:<node>/`` for a model called more than once), and
  aliases the nested outputs as the outer node's outputs; a ``training=True`` call of a nested model
  forces training on the layers inside it;
* **shared calls** keep one layer (so one kernel or one set of weights) and get one visit per node;
* **values travel in an environment** ``{TensorRef: value}`` whose values the client chooses (the
  runner's slots, the exporter's ONNX values), and so does an optional environment of implicit
  masks, bound across nested models like the tensors;
* per scope, the outputs of each node that anything reads (:meth:`Scope.referenced_outputs`) and,
  for Keras 3, the masks a ``MultiHeadAttention`` run earlier cleared (:meth:`Visit.hidden_masks`);
* one rule for ``training=True`` (:meth:`Visit.refuses_training`): a training-sensitive class
  called in training mode is refused, unless its catalogue entry says a frozen layer ignores it
  (Keras's BatchNormalization with ``trainable=False``).

The clients: shape inference (:mod:`modelgraph.shapes`, which keeps one result per nested model call
through :meth:`GraphWalker.enter_model` and :meth:`GraphWalker.model_done`, gives input nodes their
shapes through :meth:`GraphWalker.input_node` and visits a node whose inputs nothing computed with
those inputs unknown), the runner's plan (taps, profiles and the view's statistics overlay come from
runs of its steps), the ONNX exporter and the random ids of ``run --random``
(:mod:`modelgraph.runner.feeds`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from modelgraph import catalogue
from modelgraph.graph import Layer, ModelGraph, Node, TensorRef, bind_model_inputs

V = TypeVar("V")

__all__ = [
    "GraphWalker",
    "Scope",
    "Visit",
    "call_kwargs",
    "float32_variables",
    "has_dtype_policy",
    "output_keys",
    "referenced_outputs",
]


def _is_none_structure(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_none_structure(v) for v in value)
    return False


def call_kwargs(node: Node) -> dict[str, Any]:
    """The keyword arguments a kernel (or an ONNX mapping) is called with: the node's own, less
    ``training`` (see :meth:`Visit.refuses_training`) and a ``mask`` that is None throughout."""
    kwargs = {k: v for k, v in node.kwargs.items() if k != "training"}
    if "mask" in kwargs and _is_none_structure(kwargs["mask"]):
        del kwargs["mask"]
    return kwargs


def float32_variables(key: str) -> bool:
    """Whether a class keeps float32 variables under a half-precision policy (its catalogue entry)."""
    spec = catalogue.spec_for(key)
    return spec is not None and spec.dtype == "float32_variables"


def has_dtype_policy(layer: Layer) -> bool:
    """Whether a layer computes under a dtype policy of its own (its config's ``dtype``): layers do,
    Keras 3 ops and tf.keras TF-op functions run in their inputs' dtype."""
    return layer.kind != "op" and not layer.key.startswith("tf:")


def output_keys(outputs: Sequence[TensorRef]) -> list[str]:
    """Output names: the layer name, or ``layer:node:tensor`` when one layer gives several outputs
    (a name repeated after that gets ``#2``, ``#3``...)."""
    counts: dict[str, int] = {}
    for ref in outputs:
        counts[ref.layer] = counts.get(ref.layer, 0) + 1
    keys: list[str] = []
    for ref in outputs:
        key = ref.layer if counts[ref.layer] == 1 else f"{ref.layer}:{ref.node_index}:{ref.tensor_index}"
        base, k = key, 1
        while key in keys:
            k += 1
            key = f"{base}#{k}"
        keys.append(key)
    return keys


def referenced_outputs(graph: ModelGraph) -> dict[tuple[str, int], frozenset[int]]:
    """The output tensor indices of each node that the graph reads or outputs (0 always included)."""
    table: dict[tuple[str, int], set[int]] = {}
    for n in graph.nodes:
        for r in n.inputs:
            table.setdefault(r.node_key, {0}).add(r.tensor_index)
    for r in graph.outputs:
        table.setdefault(r.node_key, {0}).add(r.tensor_index)
    return {k: frozenset(v) for k, v in table.items()}


@dataclass
class Scope:
    """One graph being walked: the (nested) graph, the path prefix of its layers (``""`` at the top,
    ``"outer/"`` inside a nested model) and whether an enclosing call forces training."""

    graph: ModelGraph
    prefix: str = ""
    forced_training: bool = False
    depth: int = 0
    bindings: tuple[tuple[TensorRef, TensorRef], ...] = ()
    """A nested model's scope: (its input tensor, the caller's tensor bound to it) in binding order
    (by key for a mapping, else the call's flattened tensors in order); empty at the top."""
    _referenced: dict[tuple[str, int], frozenset[int]] | None = field(default=None, repr=False)
    _cleared: tuple[dict[TensorRef, int], dict[Any, int]] | None = field(default=None, repr=False)

    def referenced_outputs(self, node: Node) -> list[int]:
        """The output tensor indices of ``node`` the graph references (0 at least), in order. Only
        those need a value: a reference past a layer's outputs fails where it is produced, and an
        absurd index in a hostile file costs nothing before that."""
        if self._referenced is None:
            self._referenced = referenced_outputs(self.graph)
        return sorted(self._referenced.get(node.key, (0,)))

    def cleared_masks(self) -> tuple[dict[TensorRef, int], dict[Any, int]]:
        """Keras 3: (tensor -> run position of the MultiHeadAttention that clears its mask, node key
        -> run position), computed once per scope (see :func:`modelgraph.runner.masks.cleared_masks`)."""
        if self._cleared is None:
            from modelgraph.runner.masks import cleared_masks

            self._cleared = cleared_masks(self.graph)
        return self._cleared


@dataclass(slots=True)
class Visit:
    """One node being visited: its scope, layer and node (read-only by convention; not frozen, as a
    frozen dataclass costs a slower construction for every node of every walk)."""

    scope: Scope
    layer: Layer
    node: Node

    @property
    def path(self) -> str:
        """The layer's path: ``outer/inner/dense`` (``outer:1/dense`` in a shared nested model's second call)."""
        return self.scope.prefix + self.layer.name

    @property
    def graph(self) -> ModelGraph:
        return self.scope.graph

    @property
    def training(self) -> Any:
        """The call's own ``training`` argument (None when it gave none)."""
        return self.node.kwargs.get("training")

    def wants_training(self) -> bool:
        """Whether the node runs in training mode: its call says so, or an enclosing call does and
        this one does not say ``training=False``."""
        training = self.training
        return training is True or (self.scope.forced_training and training is not False)

    def refuses_training(self) -> bool:
        """Whether the node asks for training mode where it behaves differently (its catalogue entry is
        ``training_sensitive``), which a NumPy inference run or an inference export cannot do. A frozen
        layer whose entry says ``frozen_is_inference`` (Keras's BatchNormalization) runs in inference
        mode whatever its call says."""
        if not self.wants_training():
            return False
        spec = catalogue.spec_for(self.layer.key)
        if spec is None or not spec.training_sensitive:
            return False
        return not (spec.frozen_is_inference and not self.layer.trainable)

    def hidden_masks(self, keras_major: int) -> frozenset[TensorRef]:
        """Inputs of this node whose implicit masks a Keras 3 MultiHeadAttention run before it cleared."""
        if keras_major < 3:
            return frozenset()
        cleared, position = self.scope.cleared_masks()
        here = position.get(self.node.key, -1)
        return frozenset(r for r in self.node.inputs if r in cleared and cleared[r] < here)


class GraphWalker(Generic[V]):
    """Walk a graph node by node, nested models inlined; subclasses give each node its meaning.

    ``walk(graph, env, masks)`` visits the nodes of ``graph`` in order. ``env`` maps the tensors
    computed so far to the client's values; the caller binds the model's inputs in it first, and
    :meth:`run_node` stores each node's outputs there. ``masks`` (optional) holds implicit masks the
    same way and is bound across nested models like ``env``. The hooks:

    * :meth:`run_node` (required): one call of a layer or op that is not a nested model;
    * :meth:`input_node`: an input layer's node (by default nothing: the caller bound the top
      level's inputs in ``env``, and a nested call binds its model's);
    * :meth:`missing_inputs`: a node reading a tensor that nothing computed (skipped, unless the hook
      returns True: then it is visited with those tensors absent from ``env``);
    * :meth:`bad_call`: a nested model call that binds no tensor for one of its inputs (skipped);
    * :meth:`enter_model`: before a nested model's nodes are visited (``inner``: their scope);
    * :meth:`model_done`: after a nested model's outputs are bound (``outs``: its output index and
      value, for the outputs the nested model computed).
    """

    def walk(
        self,
        graph: ModelGraph,
        env: dict[TensorRef, V],
        masks: dict[TensorRef, Any] | None = None,
        scope: Scope | None = None,
    ) -> None:
        """Visit every node of ``graph`` (the top level, or ``scope``'s nested graph)."""
        scope = scope if scope is not None else Scope(graph)
        for node in graph.nodes:
            layer = graph.layer(node.layer)
            visit = Visit(scope, layer, node)
            if layer.kind == "input":
                # Bound by the caller (an InputLayer no input names is never fed).
                self.input_node(visit, env, masks)
                continue
            for r in node.inputs:
                if r not in env:  # rare: no list is built for the usual node
                    missing = [r for r in node.inputs if r not in env]
                    break
            else:
                missing = None
            if missing and not self.missing_inputs(visit, missing):
                continue
            if layer.subgraph is not None:
                self._inline(visit, env, masks)
            else:
                self.run_node(visit, env, masks)

    def _inline(self, visit: Visit, env: dict[TensorRef, V], masks: dict[TensorRef, Any] | None) -> None:
        layer, node, outer = visit.layer, visit.node, visit.scope
        sub = layer.subgraph
        assert sub is not None
        try:
            pairs = bind_model_inputs(sub, node.args, TensorRef)
        except ValueError as exc:
            self.bad_call(visit, str(exc))
            return
        seg = f"{layer.name}:{node.index}" if layer.node_count > 1 else layer.name
        inner = Scope(
            sub,
            f"{outer.prefix}{seg}/",
            outer.forced_training or visit.training is True,
            outer.depth + 1,
            bindings=tuple(pairs),
        )
        sub_env: dict[TensorRef, V] = {}
        sub_masks: dict[TensorRef, Any] | None = None if masks is None else {}
        for ref, given in pairs:
            if given not in env:
                continue  # nothing computed it: a client that visits such nodes sees it absent
            sub_env[ref] = env[given]
            if masks is not None and sub_masks is not None and given in masks:
                sub_masks[ref] = masks[given]
        self.enter_model(visit, inner)
        self.walk(sub, sub_env, sub_masks, inner)
        outs: list[tuple[int, V]] = []
        for t, ref in enumerate(sub.outputs):
            if ref in sub_env:
                here = TensorRef(layer.name, node.index, t)
                env[here] = sub_env[ref]
                outs.append((t, sub_env[ref]))
                if masks is not None and sub_masks is not None and ref in sub_masks:
                    masks[here] = sub_masks[ref]
        self.model_done(visit, outs)

    # --- hooks ----------------------------------------------------------------------------------

    def run_node(self, visit: Visit, env: dict[TensorRef, V], masks: dict[TensorRef, Any] | None) -> None:
        """Compute one node and store its outputs in ``env`` (and ``masks``)."""
        raise NotImplementedError

    def input_node(self, visit: Visit, env: dict[TensorRef, V], masks: dict[TensorRef, Any] | None) -> None:
        """An input layer's node (by default nothing: its value is bound in ``env`` by the caller at
        the top level, by the nested call inside a nested model)."""

    def missing_inputs(self, visit: Visit, missing: Sequence[TensorRef]) -> bool:
        """A node reads tensors nothing computed. Return True to visit it anyway (those tensors are
        absent from ``env``); by default it is skipped silently, and so are the nodes that read its
        outputs."""
        return False

    def bad_call(self, visit: Visit, reason: str) -> None:
        """A nested model call that cannot be bound; ``reason`` is a sentence fragment that follows
        the call (``passes 2 tensor(s) to a model with 1 input(s)``). By default: skipped silently."""

    def enter_model(self, visit: Visit, inner: Scope) -> None:
        """A nested model call is about to be walked in scope ``inner`` (by default: nothing)."""

    def model_done(self, visit: Visit, outs: Sequence[tuple[int, V]]) -> None:
        """A nested model call was walked and its outputs bound (by default: nothing)."""
