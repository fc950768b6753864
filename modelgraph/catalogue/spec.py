"""What the catalogue knows about one Keras class: :class:`LayerSpec`.

Every *concern* of a class (its shape rule, expected weight shapes, MAC count, kernel, ...) is
either an implementation or a string saying why there is none ("no kernel yet"). An entry whose
concern is ``None`` waits for the module that implements it to attach it (``@shape_rule``,
``@weight_rule``, ``@mac_rule``, the runner's and the ONNX exporter's ``@register`` attach to the
entry of the key they name and refuse a key the catalogue does not declare); an entry that is still
``None`` once every provider module is imported is half-registered, which :func:`missing_concerns`
reports and the completeness test fails on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from modelgraph import weight_names as wn

# Reasons shared by many entries (a concern that is absent says why; one place for the wording).
NO_SHAPE_RULE = "no static shape rule yet"
NO_KERNEL = "no NumPy kernel yet"
NO_WEIGHT_SHAPES = "no expected-weight-shape rule yet (weights are read, not checked against the config)"
NEEDS_SHAPES = "MACs need a shape rule"
NO_WEIGHT_NAMES = "weight names not catalogued: weights keep positional names (var_0, var_1, ...)"
NO_CONFIG = "config defaults and upgrades not catalogued yet (kernels read keys with Keras's defaults)"
NO_ONNX = "no ONNX mapping yet"
NO_ONNX_WITHOUT_KERNEL = "no reference kernel to check a mapping against yet"
NO_VARIABLES = "no variables"
FED = "a model input: fed, not computed"
BY_FUNCTION = "a TFOpLambda layer is looked up by its function (key tf:<function>)"

DtypeBehaviour = Literal["compute", "follows_input", "float32_variables"]

CONCERNS = ("read", "shapes", "weights", "macs", "masks", "run", "onnx")


@dataclass(frozen=True)
class Alias:
    """Another class name that real files carry for this class, and the Keras versions that wrote it."""

    name: str
    keras_versions: str


K2, K3 = 2, 3
"""Keys of the Keras versions in a :attr:`LayerSpec.masks`: 2 is Keras 1/2 and tf.keras, 3 is Keras 3."""


@dataclass(frozen=True)
class MaskBehaviour:
    """What one Keras class does with the implicit masks of its inputs, in one Keras version.

    ``consume``: how its call receives the masks of its inputs: ``"first"`` (tf.keras: ``mask=`` the
    mask of the first argument), ``"list"`` (tf.keras Attention: ``mask=[query, value]``), ``"mha"``
    (tf.keras MultiHeadAttention reads its tensors' masks itself), ``"call"`` (Keras 3: the layer's
    ``__call__`` fills ``mask`` from the only tensor argument, or ``<arg>_mask`` for each of several
    tensor arguments), ``"merge"`` (Keras 3 Multiply/Maximum/Minimum read their inputs' masks: the
    kernel gets ``input_masks``), or None. ``call`` names the parameters of ``call()`` in order (for
    ``"call"``, and for ``"mha"``, whose returned scores' mask depends on its arguments).
    ``produce``: its output masks: ``"drop"``, ``"pass"`` (the mask it was given or the first
    input's), ``"and"`` / ``"or"`` (merge layers), ``"concat_all"`` / ``"concat_any"``, ``"rnn"``,
    ``"bidirectional"``, ``"time_distributed"``, ``"query"`` (attention: the query's mask),
    ``"mha_scores"`` (tf.keras MHA) and ``"attention_scores"`` (Keras 3 MHA): the query's mask, and
    on returned scores the whole mask the layer's softmax applied (``attention_mask`` argument and
    causal band included), ``"embedding"``, ``"masking"``; the
    functions are in :mod:`modelgraph.runner.masks`.
    """

    consume: str | None
    produce: str
    call: tuple[str, ...] = ()
    note: str = ""
    clears: tuple[str, ...] = ()
    """Keras 3: the arguments (names in ``call``) whose tensors' masks its ``call()`` clears
    (MultiHeadAttention's ``query``, ``value``, ``key``): layers run after it read them unmasked."""


def masks(k2: MaskBehaviour | None = None, k3: MaskBehaviour | None = None) -> Mapping[int, MaskBehaviour]:
    """An entry's mask behaviour per Keras version (a version left out drops masks and takes none)."""
    return MappingProxyType({v: b for v, b in ((K2, k2), (K3, k3)) if b is not None})


#: Carries the mask over (``supports_masking`` with the default ``compute_mask``).
PASS_MASK = MaskBehaviour(None, "pass")
DROPS_MASK = masks()


@dataclass(frozen=True)
class ConfigSpec:
    """The config keys a class reads with Keras 3's defaults, and how an older config upgrades.

    ``defaults`` is None when they are not catalogued yet. ``upgrade(config, keras_version)`` returns
    the config as Keras 3 would read it (renamed keys, defaults that changed between versions made
    explicit, dropped keys removed); ``keras_version`` is None when the file does not say.
    ``equivalent(config, keras_version)``, applied after it, writes settings that are equal in effect
    one way for comparing (``diff``); unlike ``upgrade`` it may drop what a writer must keep (a
    Bidirectional ``backward_layer`` equal to the one Keras would make).
    """

    defaults: Mapping[str, Any] | None = None
    upgrade: Callable[[Mapping[str, Any], tuple[int, int, int] | None], dict[str, Any]] | None = None
    equivalent: Callable[[Mapping[str, Any], tuple[int, int, int] | None], dict[str, Any]] | None = None

    def read(self, config: Mapping[str, Any], keras_version: tuple[int, int, int] | None) -> dict[str, Any]:
        """The config as Keras 3 reads it: upgraded, and every catalogued default made explicit."""
        out = self.upgrade(config, keras_version) if self.upgrade is not None else dict(config)
        for key, value in (self.defaults or {}).items():
            out.setdefault(key, value)
        return out


WeightNames = Callable[[Mapping[str, Any]], "tuple[str, ...] | None"]


@dataclass(frozen=True)
class Recurrence:
    """A recurrent layer's step, for its shape, weight and MAC rules: ``gates`` equal column blocks
    in its kernels (LSTM 4, GRU 3), ``states`` state tensors it returns with ``return_state``, its
    ``bias`` layout (``"gates"``: one ``gates * units`` vector; ``"cudnn"``: two of them joined;
    ``"reset_after"``: a ``(2, gates * units)`` matrix when the config says ``reset_after``), and
    whether its step is a convolution (ConvLSTM) rather than a matrix product."""

    gates: int
    states: int
    bias: Literal["gates", "cudnn", "reset_after"] = "gates"
    convolutional: bool = False


@dataclass(frozen=True)
class Keras3Writing:
    """How ``convert`` writes a class that is not one of ``keras.layers`` (a plugin's custom class):
    the ``module`` and ``registered_name`` of its Keras 3 record (None: what the file had, else the
    class name) and ``upgrade(config) -> config`` for the config Keras 3 reads (None: as it is). Keras
    loads such a record only with the user's class in ``custom_objects`` (or registered)."""

    module: str | None = None
    registered_name: str | None = None
    upgrade: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None


@dataclass(frozen=True)
class Keras3Rules:
    """How ``convert`` writes a class Keras 3 has (or replaces), beyond :attr:`ConfigSpec.upgrade`
    (which ``diff`` shares): ``upgrade(config, ctx) -> config`` makes the writer-only rewrites and
    raises :class:`modelgraph.catalogue.writing.NotConvertible` for what Keras 3 cannot express
    (``ctx.major``/``ctx.version`` is the Keras version that wrote the file, ``ctx.layer(class_name,
    config)`` upgrades a wrapped layer, ``ctx.cell(record)`` an RNN cell record); ``class_name`` is the
    Keras 3 class it is written as when Keras 3 dropped it (tf.keras ``ThresholdedReLU`` is a
    ``ReLU``); ``exact_input_rank`` is the only input rank Keras 3 builds it for where tf.keras took
    extra leading axes as batch axes; ``folds_initial_state``: tf.keras's call takes its
    ``initial_state`` folded into the first argument (``rnn([x, h, c])``), Keras 3's as
    ``initial_state=``; ``time_major``: it has tf.keras's ``time_major`` option, which Keras 3 does not;
    ``refuse`` says why ``convert`` never writes the class (None: it does);
    ``per_step``: it applies the layer of its ``layer`` config to each step of its input (one more
    leading axis than that layer sees: TimeDistributed)."""

    upgrade: Callable[[dict[str, Any], Any], dict[str, Any]] | None = None
    class_name: str | None = None
    exact_input_rank: int | None = None
    folds_initial_state: bool = False
    time_major: bool = False
    refuse: str | None = None
    per_step: bool = False


@dataclass(frozen=True)
class LegacyH5Rules:
    """How ``convert`` writes a class to a legacy ``.h5`` that tf_keras 2 and Keras 3 must both load:
    ``refuse`` says why one ``.h5`` cannot give both loaders this class (None: it can);
    ``refuse_from_keras2`` the same for a layer read from a Keras 1/2 file only; ``renamed_keys`` maps a
    Keras 3 config key to tf.keras's spelling (InputLayer ``batch_shape`` -> ``batch_input_shape``);
    ``no_initial_state``: a call given ``initial_state`` is refused (Keras 3's .h5 loader does not
    resolve keyword tensors, and this class refuses tf.keras's folded ``rnn([x, *states])``).
    For a Keras 3 op (tf_keras has no op nodes): ``merge_layer``, the layer that computes it on two
    float tensors of one shape; ``rescaling(number, tensor_first) -> (scale, offset)``, the
    ``Rescaling`` layer that computes it on a float tensor and a number, bit for bit."""

    refuse: str | None = None
    refuse_from_keras2: str | None = None
    renamed_keys: Mapping[str, str] = field(default_factory=dict)
    no_initial_state: bool = False
    merge_layer: str | None = None
    rescaling: Callable[[float, bool], tuple[float, float]] | None = None


Pads2D = list[list[int]]
"""Explicit 2-D zero padding: ``[[top, bottom], [left, right]]``."""


@dataclass(frozen=True)
class Fusion:
    """What the runner's fusion passes (:mod:`modelgraph.runner.passes`) may merge a class's layer
    with. Each pass still checks the layer's config, weights and call (channels-last float32, one
    plain call, the link read by nothing else); these say which role the class can play at all. A
    class that opts in promises that its kernel computes what the built-in class of that role does
    with the same config keys and weights (a fused step runs the built-in fast kernels on them).

    ``channel_axis``: the layer is linear in its ``kernel`` (a separable conv's ``pointwise_kernel``)
    and ``bias``, with output channels on this axis (counted with the batch axis: Dense 1, Conv2D 3),
    so a following BatchNormalization on that axis folds into those weights and a ReLU / relu6 / swish
    after it into its ``activation`` (its kernel must read ``use_bias`` and ``activation``); None: it
    does not absorb them. ``depthwise``: its kernel's last two axes are (input channels, depth
    multiplier), an output channel per pair. ``batchnorm``: an inference BatchNormalization
    (``gamma``, ``beta``, ``moving_mean``, ``moving_variance``, ``epsilon``, ``axis``) that may be
    folded into the layer before it. ``bottleneck``: a stage of a merged step's convolutions (``"pointwise"``:
    a Conv2D-like layer that, when its kernel is 1x1, may run as an inverted bottleneck's expansion or
    projection or as the conv reading a squeeze-and-excitation product; ``"depthwise"``: a
    DepthwiseConv2D-like layer, an inverted bottleneck's middle stage). ``residual``: a Conv2D-like
    layer whose epilogue may add a residual sum. ``sums``: it sums its inputs element-wise (Add), so
    the sum may run in an epilogue. ``multiplies``: it multiplies its inputs element-wise (Multiply),
    so a product of two read by a 1x1 conv may scale that conv's kernel rows instead of the tensor.
    ``shareable``: its output depends on nothing but its input and config (no weights, no state, no
    randomness at inference), so two calls of the same config on the same tensor compute the same
    tensor and one may stand for both.
    ``separable``: a SeparableConv2D-like layer (``depthwise_kernel``, ``pointwise_kernel``, ``bias``
    on 2-D input) whose depthwise stage may apply the ReLU / relu6 and zero padding before it to its
    row slabs as it reads them. ``activation(config)``: the
    activation config value the layer amounts to (an ``Activation``'s ``activation``; ``"relu"`` or
    ``"relu6"`` for a plain ``ReLU``), None when it is not exactly one. ``zero_padding(config)``: the
    explicit zeros it pads a channels-last 2-D input with (None: malformed), for the window op after
    it to read. ``takes_zero_padding(config, pads)``: whether its window reads those pads itself (its
    ``padded_kernel``; Conv2D with one group, DepthwiseConv2D, a valid MaxPooling2D or
    AveragePooling2D whose pool is wider than the pads)."""

    channel_axis: int | None = None
    depthwise: bool = False
    batchnorm: bool = False
    bottleneck: Literal["pointwise", "depthwise"] | None = None
    residual: bool = False
    sums: bool = False
    multiplies: bool = False
    shareable: bool = False
    separable: bool = False
    activation: Callable[[Mapping[str, Any]], Any] | None = None
    zero_padding: Callable[[Mapping[str, Any]], Pads2D | None] | None = None
    takes_zero_padding: Callable[[Mapping[str, Any], Pads2D], bool] | None = None


@dataclass(frozen=True)
class FunctionSpec:
    """A function a config names by its registered name: an activation (``kind="activation"``, with a
    NumPy ``kernel(x) -> y`` and an ``onnx(e, x) -> name`` lowering through the exporter's emitter),
    initializer or other function (``"initializer"``, ``"function"``: known by name, so ``validate``
    does not report them as unknown). ``name`` matches a config's name with or without the
    ``package>`` prefix Keras 3 adds (``"gelu_tanh"`` matches ``"plugins>gelu_tanh"``).

    ``keras_versions``: the Keras major versions whose files mean this function by the name (Keras's
    ``hard_sigmoid`` is registered twice: ``clip(0.2 x + 0.5, 0, 1)`` for ``("1", "2")``,
    ``relu6(x + 3) / 6`` for ``("3",)``). ``elementwise``: it maps each value on its own, so the
    exporter applies it to a tensor in whatever layout it is stored in; otherwise it works along the
    last axis (softmax) and gets the tensor in Keras's layout. ``family``: ``"builtin"`` for
    modelgraph's own (whose implementations its provider modules attach, as they do a layer's),
    ``"plugin NAME"`` or ``"custom"`` for the others.
    """

    kind: str
    name: str
    kernel: Callable[..., Any] | str | None = None
    onnx: Callable[..., Any] | str | None = None
    plugin: str = ""
    keras_versions: tuple[str, ...] = ("1", "2", "3")
    elementwise: bool = True
    family: str = ""


#: Every Keras major version (the default of a function the versions agree on).
ALL_KERAS_VERSIONS = ("1", "2", "3")
#: The family of modelgraph's own functions (:mod:`modelgraph.catalogue.activations`).
BUILTIN_FUNCTIONS = "builtin"


@dataclass(frozen=True)
class LayerSpec:
    """Everything modelgraph knows about one Keras class (a layer, a Keras 3 op, a TFOpLambda function).

    ``key`` is the catalogue key: the Keras 3 class name, ``op:<Class>`` for a Keras 3 op,
    ``tf:<function>`` for a tf.keras ``TFOpLambda``. Implementation slots (``shape``,
    ``weight_shapes``, ``macs``, ``kernel``, ``onnx``) hold a callable, a string saying why there is
    none, or None until their provider module attaches one (see the module docstring).
    """

    key: str
    family: str = ""
    """The catalogue module that declares it (set when it is registered)."""
    keras_versions: tuple[str, ...] = ("2", "3")
    """Keras major versions whose files carry this class (Keras 1 names are aliases)."""
    aliases: tuple[Alias, ...] = ()
    config: ConfigSpec | str = NO_CONFIG
    weight_names: WeightNames | str = NO_WEIGHT_NAMES
    """``(config) -> canonical names in Keras's weight order`` (None: unknown for this config)."""
    quantized_weight_names: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Variables ``model.quantize(mode)`` adds after the float ones, by mode (``int8``, ``int4``;
    ``int4_grouped``: what int4 per group of rows adds to ``int4``'s); a mode it does not name keeps
    positional names."""
    legacy_weight_names: Mapping[str, str] = field(default_factory=dict)
    """Names a legacy (tf.keras) file stores that Keras 3 spells otherwise: ``{stored: canonical}``."""
    legacy_weight_path: Callable[[list[str], str, Mapping[str, Any] | None], str | None] | None = None
    """``(path segments, last segment, config) -> canonical name`` of a weight a legacy or TF.js file
    stores under a path naming sublayers (MultiHeadAttention ``mha/query/kernel``); None: by the
    last segment."""
    keras1_weight_names: Mapping[str, str] = field(default_factory=dict)
    """Where a Keras 1 weight suffix means something else than for most layers (Embedding's ``W``
    is its ``embeddings``, not a ``kernel``): ``{usual canonical name: this class's}``."""
    keras3_weights: Callable[[str, Mapping[str, Any]], Any] | None = None
    """Where the variables sit in a Keras 3 weights tree when not all in the layer's own ``vars``
    (a :mod:`modelgraph.weight_names` layout: ``in_cell``, ``wrapped_layer``, ...)."""
    weight_shapes: Callable[..., Any] | str | None = None
    quantized_weight_shapes: Callable[..., Any] | None = None
    """``(config, mode, weights) -> weights``: the variables a Keras 3 ``model.quantize(mode)`` stores
    instead of and after the float ones (``mode``: ``int8``, ``int4``...), from the float weight
    shapes; None when the class is not quantized (attached by :mod:`modelgraph.shape_rules`)."""
    shape: Callable[..., Any] | str | None = None
    macs: Callable[..., Any] | str | None = None
    masks: Mapping[int, MaskBehaviour] = field(default_factory=lambda: DROPS_MASK)
    """Mask behaviour per Keras version (:data:`K2`, :data:`K3`); a version not listed drops masks."""
    linear_weights: tuple[str, ...] = ()
    """The weights its ``activation`` is applied to a linear function of (Dense: ``kernel``,
    ``bias``): scaling exactly these scales the activation's input (``convert`` keeps Keras 2's
    ``hard_sigmoid`` exact in Keras 3 so)."""
    non_trainable_weights: tuple[str, ...] = ()
    """Canonical names of the variables Keras creates non-trainable (BatchNormalization's moving
    statistics): counted as non-trainable parameters, written non-trainable to a legacy ``.h5``."""
    recurrence: Recurrence | None = None
    """A recurrent layer's gates, states and bias layout (None for every other class)."""
    leading_batch_rank: int | None = None
    """The input rank of a tf.keras layer that takes extra leading axes as batch axes when handed a
    larger rank (a convolution runs ``tf.nn.convolution``: a Conv1D given (batch, a, steps,
    channels) convolves ``steps`` for every (batch, a); TimeDistributed relies on it)."""
    keras3_weight_upgrades: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)
    """``{canonical name: (array) -> array}``: how an older file's stored array becomes the one Keras 3
    creates (tf.keras's Attention ``scale`` of shape (1,) is a scalar in Keras 3); ``convert``."""
    weight_dtypes: Mapping[str, str] = field(default_factory=dict)
    """Variables whose dtype is fixed whatever the layer's dtype policy: ``{canonical name: dtype}``
    (Normalization's ``count`` is an int64)."""
    weight_inputs: Callable[..., Any] | None = None
    """``(call) -> input shapes`` its weights are built from when they are not the shapes of its
    positional tensors in order (MultiHeadAttention: query, value, key; a key left out is the value);
    may raise ``Unknown``/``ShapeError`` (attached by :mod:`modelgraph.shape_rules`)."""
    keeps_values: bool = False
    """Its first output holds values of its first input only, moved or cast (Reshape, Flatten, a
    cast, Masking): ids stay ids through it (``run --random`` draws ids for an Embedding after it)."""
    id_range: Callable[[Mapping[str, Any]], int | None] | None = None
    """``(config) -> n``: its input holds ids in ``[0, n)`` (Embedding: ``input_dim``; None when the
    config gives no usable size); ``run --random`` draws such ids for a model input that reaches it
    (also through the layer a wrapper's ``wrapped_keys`` holds)."""
    input_axis: bool = False
    """Its ``axis`` config counts dimensions of its input: with the input rank known, ``-1`` and
    ``rank - 1`` are the same axis (Keras 3 writes ``axis: -1``, tf.keras ``[3]``; ``diff``)."""
    training_sensitive: bool = False
    """A call recorded with ``training=True`` behaves differently (Dropout, BatchNormalization)."""
    frozen_is_inference: bool = False
    """A layer with ``trainable=False`` runs in inference mode even when called with ``training=True``
    (Keras's BatchNormalization, so fine-tuning keeps its moving statistics)."""
    dtype: DtypeBehaviour = "compute"
    """``compute``: outputs in the layer's compute dtype; ``follows_input``: a non-float input passes
    through with its dtype; ``float32_variables``: variables kept in float32 under mixed precision."""
    kernel: Callable[..., Any] | str | None = None
    fast_kernels: tuple[Callable[..., Any], ...] = ()
    fusion: Fusion | None = None
    """The roles the runner's fusion passes may give its layers (None: never merged; see :class:`Fusion`)."""
    padded_kernel: Callable[..., Any] | None = None
    """``(spec, pads) -> kernel``: its kernel reading explicit zero padding ``pads`` itself, so the
    padded copy of its input is never made (attached by :mod:`modelgraph.runner.fast.fused`; used when
    its ``fusion.takes_zero_padding`` accepts the pads)."""
    input_quantizer_axis: int | None = None
    """The axis Keras's quantized call always quantizes its input over (Dense: -1): a
    ``quantization_config`` whose activation quantizer names another is refused (None: the config's
    axes are the ones its computation contracts, EinsumDense)."""
    onnx: Callable[..., Any] | str | None = None
    """The ONNX mapping (:mod:`modelgraph.saving.onnx.mappings`, attached like the kernels; building a
    model with it needs the optional ``onnx`` package, attaching it does not)."""
    keras3: Keras3Writing | None = None
    """How ``convert`` writes a class that is not one of ``keras.layers`` (None for the built-ins,
    which the writer knows; a custom class without it is written only with ``--keep-unknown``)."""
    wrapped_keys: tuple[str, ...] = ()
    """The config keys holding the record of a layer it wraps (TimeDistributed ``layer``;
    Bidirectional ``layer``, ``backward_layer``)."""
    directions: tuple[str, ...] = ()
    """A wrapper that runs its layer once per direction: the directions, in weight order
    (Bidirectional ``forward``, ``backward``; Keras 1 stored each one's weights under its prefix)."""
    keras1_class: Callable[[Mapping[str, Any]], tuple[str, dict[str, Any]]] | None = None
    """A Keras 1 class Keras 2 read as another: ``(config) -> (class name, config)`` (Keras 1 ``Merge``
    by mode)."""
    keras1_kernel: Callable[[Any, Mapping[str, Any], bool], Any] | None = None
    """``(array, config, theano) -> array``: a Keras 1 ``kernel`` in Keras 2's layout (Keras 1
    convolutions; ``theano``: the file was made with Theano, which flipped the kernel)."""
    config_dtype: bool = False
    """A Keras 3 op whose config carries a ``dtype`` (Cast, ZerosLike, ...): how a record without
    ``module`` (Keras 3's legacy ``.h5``) is told to be an op rather than a layer."""
    keras3_op: Callable[..., Any] | str | None = None
    """For a ``tf:<function>`` entry: how ``convert`` writes the TFOpLambda call as a Keras 3 op node,
    ``(args, kwargs) -> OpCall`` (attached by :mod:`modelgraph.saving.tf_ops`; None: refused)."""
    keras3_rules: Keras3Rules | None = None
    """How ``convert`` writes a Keras class for Keras 3 beyond its config upgrade (None: as upgraded)."""
    legacy_h5: LegacyH5Rules | None = None
    """How ``convert`` writes it to a legacy ``.h5`` for tf_keras and Keras 3 (None: as it is)."""
    plugin: str = ""
    """The plugin that registered the entry ("" for the built-in catalogue)."""

    @property
    def class_name(self) -> str:
        """The class name a file carries (the key without its ``op:``/``tf:`` prefix)."""
        return self.key.split(":", 1)[1] if self.key.startswith(("op:", "tf:")) else self.key


def zero_macs(*_: Any) -> int:
    """The MAC rule of a class that does no multiply-accumulate work (element-wise, data movement)."""
    return 0


#: The fields of a class with no variables and no multiply-accumulates (``**WEIGHTLESS``).
WEIGHTLESS: Mapping[str, Any] = {"macs": zero_macs, "weight_names": wn.no_weights}
PROPAGATES_MASK = masks(PASS_MASK, PASS_MASK)


def _slot(value: Any) -> bool | str:
    if value is None:
        return False
    return value if isinstance(value, str) else True


def support(spec: LayerSpec) -> dict[str, bool | str]:
    """Per concern (:data:`CONCERNS`): True when implemented, else the reason there is none."""
    weights = _slot(spec.weight_names)
    if weights is True and spec.weight_shapes != NO_VARIABLES:
        weights = _slot(spec.weight_shapes)
    return {
        "read": True,
        "shapes": _slot(spec.shape),
        "weights": weights,
        "macs": _slot(spec.macs),
        "masks": True,
        "run": _slot(spec.kernel),
        "onnx": _slot(spec.onnx),
    }


def missing_concerns(spec: LayerSpec) -> list[str]:
    """The concerns an entry neither implements nor explains (empty for a complete entry)."""
    slots = {
        "shape": spec.shape,
        "weight_shapes": spec.weight_shapes,
        "macs": spec.macs,
        "kernel": spec.kernel,
        "weight_names": spec.weight_names,
        "config": spec.config,
        "onnx": spec.onnx,
    }
    missing = [name for name, value in slots.items() if value is None or value == ""]
    if not spec.family:
        missing.append("family")
    return missing


def _entry(key: str, fields: dict[str, Any]) -> LayerSpec:
    """An entry; with no kernel (a reason instead) there is no ONNX mapping either, for that reason
    when it is not a missing implementation (a fed input, a function looked up by name)."""
    kernel = fields.get("kernel")
    if isinstance(kernel, str):
        fields.setdefault("onnx", NO_ONNX_WITHOUT_KERNEL if kernel == NO_KERNEL else kernel)
    return LayerSpec(key, **fields)


def layer(key: str, **fields: Any) -> LayerSpec:
    """A layer class's entry (weights named in ``weight_names``; shapes, MACs, kernel, ONNX attached)."""
    if fields.get("weight_names") is wn.no_weights:
        fields.setdefault("weight_shapes", NO_VARIABLES)
    return _entry(key, fields)


def op(class_name: str, **fields: Any) -> LayerSpec:
    """A Keras 3 op's entry (``op:<Class>``): ops have no variables."""
    fields.setdefault("keras_versions", ("3",))
    fields.setdefault("weight_names", wn.no_weights)
    fields.setdefault("weight_shapes", NO_VARIABLES)
    return _entry(f"op:{class_name}", fields)


def tf_op(function: str, **fields: Any) -> LayerSpec:
    """A tf.keras ``TFOpLambda`` function's entry (``tf:<function>``): no variables; Keras 2 only."""
    fields.setdefault("weight_names", wn.no_weights)
    fields.setdefault("weight_shapes", NO_VARIABLES)
    fields.setdefault("keras_versions", ("2",))
    return _entry(f"tf:{function}", fields)


def layers(keys: tuple[str, ...], **fields: Any) -> tuple[LayerSpec, ...]:
    """Entries for several layer classes that share every field but the key."""
    return tuple(layer(key, **fields) for key in keys)


def ops(class_names: tuple[str, ...], **fields: Any) -> tuple[LayerSpec, ...]:
    """Entries for several Keras 3 ops that share every field but the key."""
    return tuple(op(name, **fields) for name in class_names)


def tf_ops(functions: tuple[str, ...], **fields: Any) -> tuple[LayerSpec, ...]:
    """Entries for several TFOpLambda functions that share every field but the key."""
    return tuple(tf_op(name, **fields) for name in functions)
