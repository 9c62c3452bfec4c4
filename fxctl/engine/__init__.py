"""The engine: facts -> operations -> plan -> apply -> verify, across hosts, with results per host."""

from fxctl.engine.apply import HostReport, Recipe, Status, StepReport, converge
from fxctl.engine.fact import Fact, FactError, gather_facts
from fxctl.engine.plan import Refused, Step, run_operation

__all__ = ["Fact", "FactError", "gather_facts", "Refused", "Step", "run_operation", "HostReport", "Recipe",
           "Status", "StepReport", "converge"]
