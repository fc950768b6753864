"""Convert tf_keras .h5 samples to TensorFlow.js layers models. Run in the tensorflowjs venv.

    python samples/tfjs_convert.py          # every k2 golden whose JSON lists files.tfjs

tensorflowjs 4.22 imports tensorflow_decision_forests at import time, which fails in this venv with a
protobuf version error; the Keras-H5 path does not use it, so a stub module is installed first.
Variants: "" (float32), "_q8" (--quantize_uint8, all weights), "_f16" (--quantize_float16, all weights).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import types
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
sys.modules.setdefault("tensorflow_decision_forests", types.ModuleType("tensorflow_decision_forests"))

from tensorflowjs.converters import converter  # noqa: E402

HERE = Path(__file__).resolve().parent
FLAGS = {"": [], "_q8": ["--quantize_uint8"], "_f16": ["--quantize_float16"]}


def convert(h5: Path, out_dir: Path, variant: str):
    if out_dir.exists():
        shutil.rmtree(out_dir)
    # a bare --quantize_* flag (nargs="?") must come after the positional paths, or argparse eats a path
    converter.convert(["--input_format=keras", str(h5), str(out_dir), *FLAGS[variant]])


def main():
    import tensorflowjs

    done = []
    for gj in sorted((HERE / "goldens").glob("k2_*.json")):
        info = json.loads(gj.read_text(encoding="utf-8"))
        tfjs = info.get("files", {}).get("tfjs")
        if not tfjs:
            continue
        for variant_key, model_json in tfjs.items():
            variant = "" if variant_key == "float32" else variant_key
            out_dir = (HERE / model_json).parent
            convert(HERE / info["files"]["h5"], out_dir, variant)
            done.append(str(out_dir.relative_to(HERE)))
        info["tfjs_converter"] = f"tensorflowjs {tensorflowjs.__version__} (--input_format=keras)"
        gj.write_text(json.dumps(info, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print("converted:", *done, sep="\n  ")


if __name__ == "__main__":
    main()
