"""modelgraph, modelscan and modelaudit side by side over the project's hostile set.

The hostile set is ``tests/validate/_payloads.py``: the real Keras 3.15.1 sample ``samples/k3/cnn.keras``
(or its legacy ``cnn.h5``) with one payload of a Keras advisory or reader attack put in, one file per
security rule and container. Each tool scans each file; a file counts as caught when the tool reports a
problem with it (modelgraph: an error-severity ``SEC`` finding; modelscan and modelaudit: exit code 1,
"issues found"). A tool that errors out or skips the file does not catch it. The script prints one row
per file and the catch count per tool, and flags on the two clean samples (controls).

The peers run from their own venv (they pin old dependencies; not a modelgraph dependency).
modelscan scans ``.keras`` files only with TensorFlow importable (without it, it exits 3 on every
``.keras`` and says "No issues found!"); a ``.pth`` line lends it the TensorFlow of another venv::

    python3 -m venv /tmp/peers && /tmp/peers/bin/pip install modelscan==0.8.8 modelaudit==0.2.54 h5py
    echo /work/venvs/k3/lib/python3.11/site-packages > /tmp/peers/lib/python3.11/site-packages/zz_tf.pth
    TF_ENABLE_ONEDNN_OPTS=0 .venv/bin/python bench/peers_security.py --peers-venv /tmp/peers

A tool missing from the venv is reported as not run.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import modelgraph

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "validate"))
import _payloads as P  # noqa: E402

TIMEOUT = 120


def hostile_set(folder: Path) -> list[tuple[str, Path]]:
    """(case name, file) for every payload builder, each built in its own folder."""
    builders = {}
    for rule, (build, _code) in P.CASES.items():
        builders[rule] = build
    for rule, build in P.H5_CASES.items():
        builders[f"{rule}-h5"] = build
    for rule, build in P.EXTRA_CASES.items():
        builders.setdefault(rule, build)
    out = [("clean-keras", P.CNN_KERAS), ("clean-h5", P.CNN_H5)]  # controls: the samples as Keras wrote them
    for name, build in sorted(builders.items()):
        sub = folder / name
        sub.mkdir()
        out.append((name, build(sub)))
    return out


def modelgraph_catches(path: Path) -> str:
    report = modelgraph.validate(path, check_values=False)
    rules = sorted({i.rule for i in report.issues if i.severity == "error" and i.rule.startswith("SEC")})
    return "yes " + ",".join(rules) if rules else "no"


def _peer(cmd: list[str]) -> str:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return "timeout"
    if proc.returncode == 1:
        return "yes"
    if proc.returncode == 0:
        return "no"
    return f"error (exit {proc.returncode})"


def peers(venv: Path | None) -> dict[str, list[str] | None]:
    tools: dict[str, list[str] | None] = {}
    for tool, args in {"modelscan": ["-p"], "modelaudit": ["scan"]}.items():
        exe = venv / "bin" / tool if venv else None
        tools[tool] = [str(exe), *args] if exe is not None and exe.exists() else None
    return tools


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peers-venv", type=Path, default=None, help="venv with modelscan and modelaudit")
    args = parser.parse_args()
    tools = peers(args.peers_venv)
    with tempfile.TemporaryDirectory() as tmp:
        cases = hostile_set(Path(tmp))
        header = ["case", "file", "modelgraph", *tools]
        rows = []
        for name, path in cases:
            row = [name, path.name, modelgraph_catches(path)]
            for cmd in tools.values():
                row.append("not run" if cmd is None else _peer([*cmd, str(path)]))
            rows.append(row)
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))
    print()
    hostile = [r for r in rows if not r[0].startswith("clean")]
    clean = [r for r in rows if r[0].startswith("clean")]
    for i, tool in enumerate(header[2:], start=2):
        caught = sum(1 for r in hostile if str(r[i]).startswith("yes"))
        alarms = sum(1 for r in clean if str(r[i]).startswith("yes"))
        print(
            f"{tool}: caught {caught} of {len(hostile)} hostile files; {alarms} of {len(clean)} clean files flagged"
        )


if __name__ == "__main__":
    main()
