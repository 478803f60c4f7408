"""dlbench: true, comparable, cheap deep-learning benchmarks on GPUs."""

import logging

__version__ = "0.2.0"


def _not_torchaos_enum_notice(record: logging.LogRecord) -> bool:
    """torchao, which transformers imports where it is installed (the fp8 extra), registers its
    enums with torch, and torch 2.11 and later log a deprecation line for each on stderr: not
    the one line a run's error or warning must be."""
    return "is an Enum subclass and is now natively supported" not in record.getMessage()


logging.getLogger("torch.utils._pytree").addFilter(_not_torchaos_enum_notice)
