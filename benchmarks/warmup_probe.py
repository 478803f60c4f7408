"""On a GPU: what a run's warm-up costs and buys. Runs one `dlbench` command line in this
process after setting cuDNN's benchmark limit (how many algorithms autotuning tries for each
convolution; PyTorch's default is 10) and whether inductor's coordinate-descent tuning may run,
so that two processes can compare first-step time and throughput.
Usage: PYTHONPATH=src python3 benchmarks/warmup_probe.py LIMIT CDT(on|off|force) ARGS..."""

from __future__ import annotations

import sys

import torch

from dlbench.cli import main


def forbid_coordinate_descent() -> None:
    """Keep inductor's coordinate-descent tuning off even where dlbench turns it on."""
    import torch._inductor.config as inductor

    config_class = type(inductor)
    setter = config_class.__setattr__

    def refuse(module, name: str, value) -> None:
        if module is inductor and name == "coordinate_descent_tuning":
            value = False
        setter(module, name, value)

    config_class.__setattr__ = refuse


if __name__ == "__main__":
    limit, cdt, *args = sys.argv[1:]
    torch.backends.cudnn.benchmark_limit = int(limit)
    if cdt == "off":
        forbid_coordinate_descent()
    elif cdt == "force":  # for every compile of the run, not only the decode step's
        import torch._inductor.config as inductor

        inductor.coordinate_descent_tuning = True
    sys.argv = ["dlbench", *args]
    main()
