"""The engine: facts -> operations -> plan -> apply -> verify, across hosts, with results per host."""

from fxctl.engine.fact import Fact, FactError, gather_facts
from fxctl.engine.plan import HostPlan, Step, plan_steps
from fxctl.engine.apply import HostReport, Recipe, Status, StepReport, converge

__all__ = ["Fact", "FactError", "gather_facts", "HostPlan", "Step", "plan_steps", "HostReport", "Recipe",
           "Status", "StepReport", "converge"]
