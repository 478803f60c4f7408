"""The scenarios by name (a plan's `scenario`: engine.plan.scenario_of), as timm's registry
names its models: one class each, one interface (engine.scenarios.base.Scenario)."""

from __future__ import annotations

from dlbench.engine.scenarios.base import Scenario
from dlbench.engine.scenarios.generate import GenerateScenario
from dlbench.engine.scenarios.steps import InferScenario, TrainScenario

SCENARIOS: dict[str, Scenario] = {
    s.name: s for s in (TrainScenario(), InferScenario(), GenerateScenario())
}


def scenario_for(name: str) -> Scenario:
    """The scenario a plan runs."""
    return SCENARIOS[name]
