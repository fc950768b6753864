"""The pure NumPy runner: a plan compiled once from a ModelGraph, executed many times."""
