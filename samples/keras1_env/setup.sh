#!/usr/bin/env bash
# A development-only Keras 1.2.2 (Theano 1.0.5) venv on Python 3.11, for samples/gen_k1.py.
# Keras 1 predates Python 3.11: sitecustomize.py restores the names it imports, and one line of
# Theano's pure-Python pooling indexes with a list where NumPy now wants a tuple.
set -euo pipefail
VENV=${1:-/work/venvs/k1}
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q "numpy<1.24" "scipy<1.12" "theano==1.0.5" "keras==1.2.2" "h5py<3.12" pyyaml six
SITE=$("$VENV/bin/python" -c "import site; print(site.getsitepackages()[0])")
cp "$(dirname "$0")/sitecustomize.py" "$SITE/sitecustomize.py"
sed -i 's/\[\[region_slices\[i\]\[r\[i\]\] for i in xrange(nd)\]\]/[tuple(region_slices[i][r[i]] for i in xrange(nd))]/g' \
    "$SITE/theano/tensor/signal/pool.py"
echo "ready: KERAS_BACKEND=theano THEANO_FLAGS=\"cxx=,device=cpu,floatX=float32,blas.ldflags=,optimizer=None\" $VENV/bin/python samples/gen_k1.py"
