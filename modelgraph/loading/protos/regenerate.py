"""Regenerate the ``*_pb2.py`` modules of this folder from its ``.proto`` files.

Run ``python -m modelgraph.loading.protos.regenerate`` after editing a ``.proto``; it needs the
``grpcio-tools`` package, a development tool only. The committed modules were made with
``grpcio-tools==1.66.2`` (protobuf 5.27 code), the oldest generator whose code every protobuf runtime
from 5.27 to 7.x accepts without warnings: regenerate with that version to keep ``protobuf>=5.27.2``.
``tests/test_tensor_bundle.py`` checks the generated messages against checkpoints TensorFlow wrote.
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
