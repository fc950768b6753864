"""The modelgraph command line (installed as modelgraph.cli)."""
