"""A pickle read as opcodes, never unpickled: does it only rebuild NumPy arrays?"""

from __future__ import annotations

from typing import Any

MAX_PICKLE_SCAN_BYTES = 256 * 1024 * 1024
_NUMPY_GLOBALS = frozenset(
    {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
    }
)
_STRING_OPS = frozenset(
    {"STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8"}
)


def pickle_verdict(data: bytes) -> str:
    """``"numpy-only"`` when a pickle's only imports are the NumPy array constructors, else
    ``"unsafe"``. The pickle is parsed with :func:`pickletools.genops` and its stack simulated
    symbolically: nothing is unpickled, imported or called."""
    import pickletools

    stack: list[Any] = []
    memo: dict[int, Any] = {}
    mark = object()
    try:
        for op, arg, _pos in pickletools.genops(data):
            name = op.name
            if name.startswith("EXT"):
                return "unsafe"
            if name in ("MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT"):
                idx = len(memo) if name == "MEMOIZE" else int(arg)
                memo[idx] = stack[-1] if stack else None
                continue
            if name in ("GET", "BINGET", "LONG_BINGET"):
                stack.append(memo.get(int(arg)))
                continue
            if name == "GLOBAL":
                module, _, attr = str(arg).partition(" ")
                if (module, attr) not in _NUMPY_GLOBALS:
                    return "unsafe"
                stack.append(("global", module, attr))
                continue
            if name == "STACK_GLOBAL":
                if len(stack) < 2:
                    return "unsafe"
                attr, module = stack.pop(), stack.pop()
                if (
                    not (isinstance(module, str) and isinstance(attr, str))
                    or (module, attr) not in _NUMPY_GLOBALS
                ):
                    return "unsafe"
                stack.append(("global", module, attr))
                continue
            before = op.stack_before
            if pickletools.markobject in before:
                while stack and stack[-1] is not mark:
                    stack.pop()
                if not stack:
                    return "unsafe"
                stack.pop()
                for _ in range(before.index(pickletools.markobject)):
                    if not stack:
                        return "unsafe"
                    stack.pop()
            else:
                for _ in before:
                    if not stack:
                        return "unsafe"
                    stack.pop()
            for item in op.stack_after:
                if item is pickletools.markobject:
                    stack.append(mark)
                elif name in _STRING_OPS and isinstance(arg, str):
                    stack.append(arg)
                else:
                    stack.append(None)
            if name == "STOP":
                return "numpy-only"
    except Exception:  # noqa: BLE001 - a malformed pickle is not numpy-only
        return "unsafe"
    return "unsafe"
