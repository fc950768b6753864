"""The config scanner (``SEC0xx``): what a Keras loader would execute, import or fetch, found in a
parsed model config by an iterative walk."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from modelgraph import catalogue, safe_io
from modelgraph.validate.issue import Issue
from modelgraph.validate.security.marshal_reader import preview_bytecode
from modelgraph.validate.security.rules import issue as _issue

ALLOWED_NAMESPACES = ("keras", "keras_hub", "keras_cv", "keras_nlp", "tf_keras")

DANGEROUS_MODULES = frozenset(
    {
        "os", "posix", "nt", "subprocess", "sys", "shutil", "importlib", "pickle", "marshal", "socket",
        "ctypes", "runpy", "code", "pty", "webbrowser", "urllib", "http", "requests", "builtins", "io",
        "pathlib", "tempfile", "multiprocessing", "threading", "signal", "platform", "dill", "cloudpickle",
        "joblib", "torch", "numpy", "tensorflow",
    }
)  # fmt: skip

GADGET_NAMES = frozenset(
    {
        "load_model", "load_weights", "save_model", "save_weights", "enable_unsafe_deserialization",
        "get_file", "load_img", "save_img", "model_from_json", "model_from_yaml", "model_from_config",
        "image_dataset_from_directory", "text_dataset_from_directory", "audio_dataset_from_directory",
        "deserialize_keras_object", "register_keras_serializable", "serialize_keras_object",
        "clear_session",
    }
)  # fmt: skip

DANGEROUS_BUILTINS = frozenset(
    {
        "eval", "exec", "compile", "__import__", "open", "getattr", "setattr", "delattr", "globals",
        "locals", "vars", "input", "breakpoint", "exit", "quit", "help", "memoryview", "__build_class__",
    }
)  # fmt: skip

KNOWN_OPTIMIZERS = frozenset(
    {
        "Adam", "AdamW", "SGD", "RMSprop", "Adagrad", "Adadelta", "Adamax", "Nadam", "Ftrl", "Lion",
        "Adafactor", "LossScaleOptimizer", "Lamb", "Muon",
    }
)  # fmt: skip

LOOKUP_LAYERS = frozenset({"StringLookup", "IntegerLookup", "TextVectorization", "IndexLookup"})
TFOP_LAYERS = frozenset(catalogue.OP_LAMBDA_CLASSES)
_CODE_FIELDS = ("function", "output_shape", "mask")
_NAME_KEYS = frozenset({"name", "class_name", "registered_name", "module", "dtype", "shared_object_id"})

_PATHLIKE = re.compile(
    r"""^(?:
        [A-Za-z][A-Za-z0-9+.\-]{1,15}://        # URL with a scheme (http, https, ftp, gs, s3, hdfs, file)
      | file:                                    # file: URI
      | ~[/\\]                                   # home-relative
      | /(?!/)\S*?/                              # absolute POSIX path with at least two components
      | /(?:etc|tmp|home|root|usr|var|proc|dev|mnt|opt|Users)\b
      | [A-Za-z]:[\\/]                            # Windows drive
      | \\\\                                     # UNC
    )|(?:^|[/\\])\.\.[/\\]                       # '..' traversal anywhere
    """,
    re.X,
)


def path_like_name(name: str) -> bool:
    """Whether a layer or model name could leave a folder when used as a path component: absolute
    (``/x``, ``\\x``, ``C:/x``), a ``..`` part, a backslash or a NUL. A plain ``a/b`` stays inside."""
    if not name:
        return False
    if name.startswith(("/", "\\")) or "\\" in name or "\x00" in name:
        return True
    if len(name) >= 3 and name[1] == ":" and name[0].isalpha() and name[2] == "/":
        return True
    return ".." in name.replace("\\", "/").split("/")


def looks_like_path(value: str) -> bool:
    """Heuristic: a string Keras (or tf.io.gfile) could treat as a file path or URL."""
    return len(value) < 4096 and bool(_PATHLIKE.search(value))


def _module_allowed(module: str) -> bool:
    return any(module == ns or module.startswith(ns + ".") for ns in ALLOWED_NAMESPACES)


def _module_root(module: str) -> str:
    return module.split(".", 1)[0]


def _bytecode_blob(value: Any) -> str | None:
    """The bytecode string inside a Keras function field, in any of its historical forms."""
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple) and value and isinstance(value[0], str):
        return value[0]
    if isinstance(value, dict):
        cfg = value.get("config")
        if isinstance(cfg, dict):
            if isinstance(cfg.get("code"), str):
                return cfg["code"]
            return _bytecode_blob(cfg.get("value"))
        if isinstance(value.get("code"), str):
            return value["code"]
    return None


def _short_name(name: Any) -> str:
    """``get_file`` of ``keras.utils.get_file``, ``Custom>get_file`` or ``get_file``."""
    return name.rsplit(">", 1)[-1].rsplit(".", 1)[-1] if isinstance(name, str) else ""


def _gadget_in(cls: str, registered: Any, module: Any) -> str | None:
    """The safe_mode-bypass gadget a ``{module, class_name, registered_name}`` object names, if any
    (a function object names its function in ``config``, checked by ``_function_ref``)."""
    if cls == "function":
        return None
    for name in (cls, registered):
        if _short_name(name) in GADGET_NAMES:
            return f"{module}.{name}" if isinstance(module, str) and module else str(name)
    return None


def _is_lambda_obj(value: Any) -> bool:
    return isinstance(value, dict) and value.get("class_name") == "__lambda__"


def _layer_label(layer: str | None) -> str:
    return f"layer {layer!r}" if layer else "the model"


@dataclass
class _Frame:
    value: Any
    path: str
    layer: str | None
    in_nodes: bool
    key: str | None


class _ConfigScanner:
    def __init__(self, path: str) -> None:
        self.path = path
        self.issues: list[Issue] = []
        self.handled: set[int] = set()  # ids of subtrees already reported as code blobs
        self.reported: set[str] = set()  # JSON paths of strings already reported by a class rule

    def add(self, rule: str, message: str, where: str, hint: str = "") -> None:
        self.issues.append(_issue(rule, message, where, hint, self.path))

    def run(self, config: Any, root: str) -> list[Issue]:
        stack = [_Frame(config, root, None, False, None)]
        while stack:
            fr = stack.pop()
            v = fr.value
            if isinstance(v, dict):
                if id(v) in self.handled:
                    continue
                layer = fr.layer
                if isinstance(v.get("class_name"), str):
                    layer = self._layer_name(v) or layer
                    self._envelope(v, fr.path, layer)
                children: list[_Frame] = []
                for key, child in v.items():
                    k = str(key)
                    cpath = safe_io.json_path(fr.path, k)
                    in_nodes = fr.in_nodes or k == "inbound_nodes"
                    if k == "training" and child is True and in_nodes:
                        self.add(
                            "SEC011",
                            f"{_layer_label(layer)} is called with training=True: dropout/batch statistics "
                            "behave as in training at inference",
                            cpath,
                            "re-save the model without training=True in the call, or run with training semantics",
                        )
                    if k == "safe_mode" and child is False:
                        self.add(
                            "SEC007",
                            f"{_layer_label(layer)} passes safe_mode=False (CVE-2025-8747 pattern: "
                            "nested load without safe mode)",
                            cpath,
                            "do not load this file with Keras",
                        )
                    if k == "vocabulary" and isinstance(child, str):
                        self.add(
                            "SEC008",
                            f"{_layer_label(layer)} reads its vocabulary from {child[:200]!r} "
                            "(local file read or network fetch in Keras)",
                            cpath,
                            "inline the vocabulary in the config or ship it as a zip asset",
                        )
                        continue
                    if isinstance(child, str):
                        self._string(child, cpath, layer, k)
                    elif isinstance(child, float):
                        self._float(child, cpath, layer)
                    elif isinstance(child, dict | list):
                        children.append(_Frame(child, cpath, layer, in_nodes, k))
                stack.extend(reversed(children))
            elif isinstance(v, list):
                children = []
                for i, child in enumerate(v):
                    cpath = safe_io.json_path(fr.path, i)
                    if isinstance(child, str):
                        self._string(child, cpath, fr.layer, fr.key)
                    elif isinstance(child, float):
                        self._float(child, cpath, fr.layer)
                    elif isinstance(child, dict | list):
                        children.append(_Frame(child, cpath, fr.layer, fr.in_nodes, fr.key))
                stack.extend(reversed(children))
            elif isinstance(v, float):
                self._float(v, fr.path, fr.layer)
            elif isinstance(v, str):
                self._string(v, fr.path, fr.layer, None)
        return self.issues

    @staticmethod
    def _layer_name(d: dict[str, Any]) -> str | None:
        cfg = d.get("config")
        if isinstance(cfg, dict) and isinstance(cfg.get("name"), str):
            return cfg["name"]
        return d["name"] if isinstance(d.get("name"), str) else None

    # leaves

    def _float(self, value: float, where: str, layer: str | None) -> None:
        if not math.isfinite(value):
            self.add(
                "SEC012",
                f"{_layer_label(layer)} has a non-finite number {value!r} (NaN/Infinity are not standard JSON)",
                where,
                "strict JSON parsers reject this file; check the value is intended",
            )

    def _string(self, value: str, where: str, layer: str | None, key: str | None) -> None:
        if where in self.reported:  # already reported by the object that holds it
            return
        if "enable_unsafe_deserialization" in value:
            self.add(
                "SEC007",
                f"{_layer_label(layer)} references 'enable_unsafe_deserialization' (safe_mode bypass gadget)",
                where,
                "do not load this file with Keras",
            )
            return
        if value.startswith(("keras.", "tf_keras.")) and value.rsplit(".", 1)[-1] in GADGET_NAMES:
            self.add(
                "SEC007",
                f"{_layer_label(layer)} references {value!r}, a Keras loading API usable as a safe_mode bypass",
                where,
                "do not load this file with Keras",
            )
            return
        if key not in _NAME_KEYS and where not in self.reported and looks_like_path(value):
            self.add(
                "SEC013",
                f"{_layer_label(layer)} has a path/URL-like value {value[:200]!r}",
                where,
                "a loader or layer may read or fetch it; check it is expected",
            )

    # objects with class_name

    def _envelope(self, d: dict[str, Any], where: str, layer: str | None) -> None:
        cls = d["class_name"]
        cfg = d.get("config")
        module = d.get("module")
        label = _layer_label(layer)
        if cls == "__lambda__":
            self._code_blob("SEC002", d, where, f"{label} has a serialized Python function (__lambda__)")
            return
        self._names(d, where)
        gadget = _gadget_in(cls, d.get("registered_name"), module)
        if gadget:
            self.add(
                "SEC007",
                f"{label}: object {gadget!r} (module {module!r}) is a Keras loading/file API usable as a "
                "safe_mode-bypass gadget wherever Keras deserialises an object (initializer, regularizer, "
                "constraint, any nested config)",
                where,
                "do not load this file with Keras",
            )
            self.reported.update(safe_io.json_path(where, k) for k in ("class_name", "registered_name"))
        elif cls == "function":
            self._function_ref(d, where, label)
        elif "module" in d:
            self._module(module, cls, d.get("registered_name"), where, label)
        elif ">" in cls and not self._builtin_custom(cls):
            self.add(
                "SEC004",
                f"{label}: class {cls!r} is a registered custom object; needs its Python code",
                safe_io.json_path(where, "class_name"),
                "modelgraph never imports custom code; provide a schema or treat as opaque",
            )
        # The classes below carry code or load files in Keras. They are matched by the literal class
        # name the file stores, not through the catalogue: a plugin may replace a catalogue entry
        # (replace=True) or alias a name, and no registration may switch off a security rule.
        if cls == "Lambda" and isinstance(cfg, dict):
            self._lambda_layer(cfg, where, label)
        elif cls == "Merge" and isinstance(cfg, dict):
            self._merge_layer(cfg, where, label)
        elif cls == "TorchModuleWrapper":
            self.add(
                "SEC005",
                f"{label} is a TorchModuleWrapper: its module is a torch pickle (torch.load executes code)",
                where,
                "do not load this file with Keras; modelgraph does not read it",
            )
            if isinstance(cfg, dict):
                self.handled.update(id(x) for x in cfg.values() if isinstance(x, dict | list))
        elif cls == "TFSMLayer":
            fp = cfg.get("filepath") if isinstance(cfg, dict) else None
            self.reported.add(safe_io.json_path(safe_io.json_path(where, "config"), "filepath"))
            self.add(
                "SEC006",
                f"{label} is a TFSMLayer loading the external SavedModel {fp!r}",
                where,
                "the SavedModel is code and data outside this file; it is not followed",
            )
        elif cls in TFOP_LAYERS:
            fn = cfg.get("function") if isinstance(cfg, dict) else None
            self.add(
                "SEC010",
                f"{label} is a {cls} calling TensorFlow op {fn!r} (needs TensorFlow to run)",
                where,
                "informational: a TF op, not arbitrary code",
            )

    def _names(self, d: dict[str, Any], where: str) -> None:
        """SEC014 for an object's own name (``name`` or ``config.name``) that is a path."""
        cfg = d.get("config")
        for holder, hwhere in ((d, where), (cfg, safe_io.json_path(where, "config"))):
            if not isinstance(holder, dict):
                continue
            name = holder.get("name")
            if isinstance(name, str) and path_like_name(name):
                nwhere = safe_io.json_path(hwhere, "name")
                self.add(
                    "SEC014",
                    f"{d.get('class_name')} named {name[:200]!r}: the name is a path that leaves its folder "
                    "(Keras 3.14's directory store wrote outside the model with such names, CVE-2026-12479)",
                    nwhere,
                )
                self.reported.add(nwhere)
                return

    @staticmethod
    def _builtin_custom(name: str) -> bool:
        pkg, _, cls = name.partition(">")
        return pkg == "Custom" and cls in KNOWN_OPTIMIZERS

    def _module(self, module: Any, cls: str, registered: Any, where: str, label: str) -> None:
        mwhere = safe_io.json_path(where, "module")
        if isinstance(module, str) and module not in ("__main__", "builtins") and not _module_allowed(module):
            danger = " (a dangerous module)" if _module_root(module) in DANGEROUS_MODULES else ""
            self.add(
                "SEC003",
                f"{label}: class {cls!r} comes from module {module!r}{danger}, outside the Keras namespaces; "
                "Keras <= 3.8 imports it (CVE-2025-1550)",
                mwhere,
                "modelgraph never imports modules named in a file",
            )
            return
        reg = registered if isinstance(registered, str) else ""
        custom_reg = ">" in reg and not self._builtin_custom(reg)
        if module is None or module in ("__main__", "builtins") or custom_reg:
            self.add(
                "SEC004",
                f"{label}: class {cls!r} (registered {reg or None!r}, module {module!r}) is a custom object; "
                "needs its Python code",
                where,
                "modelgraph never imports custom code; provide a schema or treat as opaque",
            )

    def _function_ref(self, d: dict[str, Any], where: str, label: str) -> None:
        module = d.get("module")
        name = d.get("config")
        fname = name if isinstance(name, str) else ""
        short = fname.rsplit(">", 1)[-1].rsplit(".", 1)[-1]
        mod = module if isinstance(module, str) else ""
        if short in GADGET_NAMES or (mod == "builtins" and short in DANGEROUS_BUILTINS):
            self.add(
                "SEC007",
                f"{label} references function {mod + '.' if mod else ''}{fname} "
                "(safe_mode-bypass gadget; CVE-2025-1550/-8747/-9906 pattern)",
                where,
                "do not load this file with Keras",
            )
            return
        if mod and mod not in ("builtins", "__main__") and not _module_allowed(mod):
            danger = " (a dangerous module)" if _module_root(mod) in DANGEROUS_MODULES else ""
            self.add(
                "SEC003",
                f"{label} references function {fname!r} from module {mod!r}{danger}, outside the Keras "
                "namespaces; Keras <= 3.8 imports it (CVE-2025-1550)",
                safe_io.json_path(where, "module"),
                "modelgraph never imports modules named in a file",
            )
            return
        if not mod or mod in ("builtins", "__main__") or ">" in fname:
            self.add(
                "SEC004",
                f"{label} references custom function {fname!r} (module {module!r}); needs its Python code",
                where,
                "modelgraph never imports custom code",
            )

    def _code_blob(self, rule: str, value: Any, where: str, what: str) -> None:
        blob = _bytecode_blob(value)
        if isinstance(value, dict | list):
            self.handled.add(id(value))
        preview = preview_bytecode(blob) if blob else None
        text = preview.summary() if preview else "no bytecode string found"
        self.add(rule, f"{what}: {text}", where, "modelgraph never runs it; rewrite the Lambda as a layer")

    def _lambda_layer(self, cfg: dict[str, Any], where: str, label: str) -> None:
        cwhere = safe_io.json_path(where, "config")
        for fieldname in _CODE_FIELDS:
            if fieldname not in cfg:
                continue
            value = cfg[fieldname]
            ftype = cfg.get(f"{fieldname}_type")
            fwhere = safe_io.json_path(cwhere, fieldname)
            if ftype == "lambda" or _is_lambda_obj(value):
                self._code_blob(
                    "SEC001", value, fwhere, f"{label} (Lambda {fieldname}) carries Python bytecode"
                )
            elif ftype == "function" and isinstance(value, str):
                module = cfg.get("module" if fieldname == "function" else f"{fieldname}_module")
                mod = module if isinstance(module, str) else ""
                if (
                    mod and _module_root(mod) in DANGEROUS_MODULES
                ) or value in DANGEROUS_BUILTINS | GADGET_NAMES:
                    self.add(
                        "SEC007",
                        f"{label} (Lambda {fieldname}) calls {mod + '.' if mod else ''}{value}: tf.keras resolves "
                        "it from the module's globals",
                        fwhere,
                        "do not load this file with Keras",
                    )
                else:
                    self.add(
                        "SEC004",
                        f"{label} (Lambda {fieldname}) calls function {value!r} from module {module!r}; "
                        "needs its Python code",
                        fwhere,
                        "modelgraph never imports custom code",
                    )

    def _merge_layer(self, cfg: dict[str, Any], where: str, label: str) -> None:
        cwhere = safe_io.json_path(where, "config")
        for fieldname, tkey in (("mode", "mode_type"), ("output_shape", "output_shape_type")):
            ftype = cfg.get(tkey)
            if ftype not in ("lambda", "function"):
                continue
            value = cfg.get(fieldname)
            fwhere = safe_io.json_path(cwhere, fieldname)
            if ftype == "lambda":
                self._code_blob(
                    "SEC009", value, fwhere, f"{label} (legacy Merge {fieldname}) carries Python bytecode"
                )
            else:
                self.add(
                    "SEC009",
                    f"{label} (legacy Merge {fieldname}) calls function {value!r}; needs its Python code",
                    fwhere,
                    "modelgraph never imports custom code",
                )


def scan_config(config: Any, *, path: str = "", root: str = "$") -> list[Issue]:
    """Every security finding (rules SEC001-SEC014) in a parsed model config, walked iteratively.

    ``config`` is any parsed Keras JSON: a model config, a ``to_json()`` document, a layer config,
    a ``training_config`` or a TF.js ``model.json``. ``path`` is recorded on each issue; ``root`` is
    the JSON-path prefix of ``where``.
    """
    return _ConfigScanner(path).run(config, root)
