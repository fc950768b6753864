"""Regenerate every sample file and golden in samples/ (except samples/kernels/) with real Keras.

    python samples/make_samples.py                 # everything (models, wild files, apps, tfjs, checks)
    python samples/make_samples.py --skip-apps     # quick: no keras.applications
    python samples/make_samples.py --k3-python /path/python --k2-python /path/python --tfjs-python /path/python

Interpreters (flags win over environment variables, which win over the defaults):
    MODELGRAPH_K3_PYTHON   default /work/venvs/k3/bin/python    keras 3 + tensorflow (KERAS_BACKEND=tensorflow)
    MODELGRAPH_K2_PYTHON   default /work/venvs/k2/bin/python    tf_keras (Keras 2 API)
    MODELGRAPH_TFJS_PYTHON default /work/venvs/tfjs/bin/python  tensorflowjs (converter used as a library)

Steps run one at a time (one TensorFlow process at a time):
    1. k2 venv:   gen_k2.py --wild [--apps]   -> k2/, wild/, apps/k2_*, goldens/k2_*, goldens/wild_*
    2. k2 venv:   gen_wild.py                 -> wild/keras208_handmade.h5 (hand-made with h5py) + golden
    3. tfjs venv: tfjs_convert.py             -> tfjs/<model>[_q8|_f16]/model.json + shards
    4. k3 venv:   gen_k3.py [--apps] --check-k2 -> k3/, apps/k3_*, goldens/k3_*; reload of K2/wild files in Keras 3
Everything is seeded; the same library versions give the same arrays. This script itself needs only
the standard library.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULTS = {
    "k3": ("MODELGRAPH_K3_PYTHON", "/work/venvs/k3/bin/python"),
    "k2": ("MODELGRAPH_K2_PYTHON", "/work/venvs/k2/bin/python"),
    "tfjs": ("MODELGRAPH_TFJS_PYTHON", "/work/venvs/tfjs/bin/python"),
}


def run(python: str, script: str, *args: str) -> None:
    env = dict(os.environ)
    env.setdefault("KERAS_BACKEND", "tensorflow")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    env.setdefault("PYTHONHASHSEED", "0")
    env.setdefault("CUDA_VISIBLE_DEVICES", "")
    cmd = [python, str(HERE / script), *args]
    print("+", " ".join(cmd), flush=True)
    t = time.time()
    subprocess.run(cmd, check=True, env=env, cwd=HERE.parent)
    print(f"  ({time.time() - t:.0f}s)", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for key, (var, default) in DEFAULTS.items():
        ap.add_argument(f"--{key}-python", default=os.environ.get(var, default), help=f"${var} or {default}")
    ap.add_argument("--skip-apps", action="store_true", help="do not (re)build keras.applications samples")
    ap.add_argument("--skip-tfjs", action="store_true")
    args = ap.parse_args(argv)
    apps = [] if args.skip_apps else ["--apps"]
    run(args.k2_python, "gen_k2.py", "--wild", *apps)
    run(args.k2_python, "gen_wild.py")
    if not args.skip_tfjs:
        run(args.tfjs_python, "tfjs_convert.py")
    run(args.k3_python, "gen_k3.py", *apps, "--check-k2")
    return 0


if __name__ == "__main__":
    sys.exit(main())
