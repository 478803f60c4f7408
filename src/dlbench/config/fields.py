"""The run flags' vocabulary: the values each may take, the fields that make a row's key, and
how a field of a RunConfig section is declared as a flag."""

from __future__ import annotations

from dataclasses import field
from pathlib import Path

MODES = ("train", "infer")
PRECISIONS = ("32", "tf32", "16-mixed", "bf16-mixed", "16-true", "bf16-true", "fp8")
ACCELERATORS = ("auto", "gpu", "cpu")
OPTIMIZERS = ("sgd", "adamw", "adam")
DATA_LOCATIONS = ("device", "host")
CUDNN_SEARCH_CHOICES = ("auto", "on", "off")
DEFAULT_SAMPLE_INTERVAL_S = 0.1
ATTENTION_KERNELS = ("flash", "efficient", "cudnn", "math")  # SDPA's backends, by name
CHECKPOINTING = ("none", "selective", "full")  # --activation-checkpointing
LLM_IMPLS = ("native", "hf")  # native: fused projections, written for the GPU; hf: transformers
DEFAULT_OUTPUT = Path("results/benchmark.csv")
# The fields that decide what was measured: two rows with equal keys are the same experiment.
CONFIG_KEY = (
    "model",
    "mode",
    "precision",
    "fp8_recipe",
    "batch_size",
    "width",
    "height",
    "seq_len",
    "devices",
    "num_nodes",
    "strategy",
    "activation_checkpointing",
    "channels_last",
    "compile",
    "cuda_graphs",
    "llm_impl",
    "attention",
    "optimizer",
    "data_on",
    "data",
    "data_workers",
    "data_decode",
)


def option(
    default: object, help: str, *flags: str, switch: bool = False, key: str = "", only: str = ""
):
    """A field of a RunConfig section that is a command-line flag: its default, its help (the
    one place it is written), its names when they are not `--key-name`, whether it is an on-only
    switch (`--json`) rather than a `--name/--no-name` pair, its key (the flag's name, a plan
    file's and the row's column) where that is not the field's own name, and the kind of model
    it is `only` for (`llm`: an LLM's own flag, refused for any other)."""
    metadata = {"help": help, "flags": flags, "switch": switch, "key": key, "only": only}
    return field(default=default, metadata=metadata)
