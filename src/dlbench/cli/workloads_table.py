"""`dlbench models`: what can be benchmarked, with its input and sample unit."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from dlbench.workloads import get_workload, list_workloads


def show_workloads(pattern: str, count_params: bool) -> None:
    """Print the registry as a table; parameters are counted on models built on the meta device
    (no memory, no weights), which `--no-params` skips."""
    table = Table(title="dlbench workloads (also: timm:<any timm model>)")
    for column in ("name", "family", "sample", "default input", "image sizes", "description"):
        table.add_column(column, no_wrap=column != "description")
    if count_params:
        table.add_column("params (M)", justify="right")
    names = list_workloads(pattern)
    if not names and not any(c in pattern for c in "*?["):  # a bare word: the names holding it
        pattern = f"*{pattern}*"
        names = list_workloads(pattern)
    if not names:
        print(f"no workload matches {pattern!r} (a wildcard: '*vit*'; all: dlbench models)")
        return
    for name in names:
        w = get_workload(name)
        shape = w.shape(None, None, 128)
        if w.is_image:
            size = f"3x{shape.height}x{shape.width}"
            rule = f"{w.size_rule.minimum} px or more" + (
                f", a multiple of {w.size_rule.multiple}" if w.size_rule.multiple > 1 else ""
            )
        else:
            size, rule = f"{shape.seq_len} tokens (--seq-len)", "-"
        cells = [name, w.family, w.sample_unit, size, rule, w.summary]
        if count_params:
            import torch

            with torch.device("meta"):
                model = w.build(shape)
            cells.append(f"{sum(p.numel() for p in model.parameters()) / 1e6:.1f}")
        table.add_row(*cells)
    Console(width=max(Console().width, 140)).print(table)
