"""The vectorised JSON depth scan agrees with the token-by-token scan, escapes and limits included."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from modelgraph.safe_io import _json_depth_fast, _json_depth_scan

_text = st.text(alphabet=st.sampled_from(list('ab[]{}"\\\\,: ')), max_size=12)
_json = st.recursive(
    st.none() | st.integers() | _text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_text, children, max_size=4),
    max_leaves=40,
)


@settings(max_examples=400, derandomize=True, deadline=None)
@given(_json, st.none() | st.integers(0, 6))
def test_fast_depth_equals_scan(value, stop_after):
    raw = json.dumps(value).encode()
    assert _json_depth_fast(raw, stop_after) == _json_depth_scan(raw, stop_after)


def test_deep_and_escaped_inputs():
    deep = b"[" * 100_000 + b"]" * 100_000
    assert _json_depth_fast(deep, 500) == (501, 500)
    tricky = json.dumps({"k": 'a\\"[[[', "l": [[[{}]]]}).encode()
    assert _json_depth_fast(tricky) == _json_depth_scan(tricky, None) == (5, 26)
