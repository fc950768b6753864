"""Pydantic schemas: saved Keras config records and JSON report models (installed as modelgraph.schemas)."""
