"""The fusion passes, one module each (what it matches, what it produces); ``modelgraph/runner/fusion.py``
runs them in order."""
