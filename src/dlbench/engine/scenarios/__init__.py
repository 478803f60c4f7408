"""Scenarios: what a run builds and steps (a training or inference session, LLM generation,
decoders) and the bare loop it is checked against."""
