"""`dlbench gate`: base against head, interleaved on one GPU (sweep.gate), then one verdict per
configuration over the rounds (analysis.compare), with compare's exit codes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dlbench.cli.analysis import InconclusiveFails, show_comparison
from dlbench.cli.app import app
from dlbench.config.limits import GATE_ROUNDS
from dlbench.results.pairing import GATE_THRESHOLD_PCT

DEFAULT_GATE_OUTPUT = Path("results/gate.csv")
BASE_HELP = "The base side's dlbench command (a checkout's, an image's: docker run ... IMAGE)."


@app.command(
    "gate",
    help="Base against head on this GPU: each point of a plan run by both sides, each run a "
    "process forked from its side's worker, interleaved in a random order, --rounds times (the "
    "ci plan in minutes), then each configuration same, faster, slower or inconclusive; exit 1 "
    "where slower (or a side failed it), 5 where only inconclusive.",
)
def gate(
    plan: Annotated[str, typer.Argument(help="A packaged plan's name or a YAML plan.")],
    base: Annotated[str, typer.Option(help=BASE_HELP)],
    head: Annotated[str, typer.Option(help="The head side's dlbench command.")],
    rounds: Annotated[int, typer.Option(help="Runs of each point on each side.")] = GATE_ROUNDS,
    only: Annotated[
        str | None, typer.Option(help="KEY=VALUE: only the plan's runs with this tag.")
    ] = None,
    seed: Annotated[int, typer.Option(help="The seed of the sides' order in each round.")] = 0,
    output: Annotated[
        Path, typer.Option(help="Where the rows go: OUTPUT's stem .base.csv and .head.csv.")
    ] = DEFAULT_GATE_OUTPUT,
    threshold: Annotated[
        float, typer.Option(help="The smallest change worth calling, in %.")
    ] = GATE_THRESHOLD_PCT,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Markdown for CI summaries.")
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="The lines as JSON.")] = False,
    inconclusive_fails: InconclusiveFails = False,
) -> None:
    from dlbench.analysis.change import check_threshold
    from dlbench.analysis.gate_verdicts import gate_comparison
    from dlbench.cli.sweeps import plan_as_asked
    from dlbench.config import check_count
    from dlbench.config.limits import MAX_REPEATS
    from dlbench.console import stderr
    from dlbench.sweep.gate import GateRun, Side

    check_count("--rounds", rounds, MAX_REPEATS)
    check_threshold(threshold)
    sides = (Side.parse("base", base), Side.parse("head", head))
    sweep_plan = plan_as_asked(plan, None, None, only, None)
    gate_run = GateRun(sweep_plan, sides, rounds, output, seed)
    gate_run.check_outputs()  # before anything is measured: fresh files a side
    for side in sides:  # ... and each side starts a dlbench
        stderr.print(f"{side.name}: {side.check()}")
    gate_run.run()
    labels = [point.label for point in sweep_plan.points()]
    result = gate_comparison(*(gate_run.side_csv(s) for s in sides), threshold, labels)
    show_comparison(result, markdown, False, json_out, "base against head", inconclusive_fails)
    raise typer.Exit(result.exit_code(inconclusive_fails))
