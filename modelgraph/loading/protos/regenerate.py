"""Regenerate the ``*_pb2.py`` modules of this folder from its ``.proto`` files.

Run ``python -m modelgraph.loading.protos.regenerate`` (or this file by its path, which needs
nothing but grpcio-tools) after editing a ``.proto``. The generator is a development tool only:
``pip install -e '.[protos]'`` installs the pinned ``grpcio-tools==1.66.2`` (protobuf 5.27 code), the
oldest generator whose code every protobuf runtime from 5.27 to 7.x accepts without warnings:
regenerate with that version to keep ``protobuf>=5.27.2``. ``tests/test_protos.py`` compiles the
``.proto`` files again when that version is installed and compares the output with the committed
modules byte for byte; without it, it still checks that every message, enum and field the ``.proto``
files declare is the one the committed modules hold. ``tests/test_tensor_bundle.py`` and
``tests/test_savedmodel*.py`` check the messages against files TensorFlow and tf.keras wrote.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def regenerate(out_dir: Path = HERE) -> list[Path]:
    """Compile every ``.proto`` here into ``out_dir``; the generated paths."""
    from grpc_tools import protoc

    written = []
    for proto in sorted(HERE.glob("*.proto")):
        status = protoc.main(["protoc", f"-I{HERE}", f"--python_out={out_dir}", str(proto)])
        if status != 0:
            raise RuntimeError(f"protoc failed on {proto.name} (status {status})")
        written.append(out_dir / f"{proto.stem}_pb2.py")
    return written


if __name__ == "__main__":
    for path in regenerate():
        print(path)
    sys.exit(0)
