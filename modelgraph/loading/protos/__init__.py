"""Protobuf messages modelgraph decodes (TensorFlow checkpoints), generated from the ``.proto`` here."""
