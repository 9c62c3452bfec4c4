"""A deployment's Prometheus scrape targets, from its plans (fxctl.serve.render.InstancePlan) and the
inventory's arrays: one job per component, every target labelled by host, deployment and instance.

  fxctl-engine   each vLLM (or the emulator): /metrics on its port (vLLM listens on every interface)
  fxctl-tier     each LMCache server's metrics port: fxctl's tier (fxctl_tier_*) and LMCache's own (lmcache_mp_*)
  fxctl-router   vllm-router's metrics port
  fxctl-array    each initiator's array exporter (fxctl-array-exporter.service)
The tier's and the router's endpoints listen on serve.metrics_address (loopback by default): a Prometheus
on another machine needs 0.0.0.0 there; a local deployment is scraped on 127.0.0.1.
"""

from __future__ import annotations

from dataclasses import dataclass

from fxctl.errors import BadInput
from fxctl.serve.listen import LOOPBACK
from fxctl.serve.roles import Role

ENGINE, TIER, ROUTER, ARRAY = "fxctl-engine", "fxctl-tier", "fxctl-router", "fxctl-array"
JOBS = (ENGINE, TIER, ROUTER, ARRAY)


@dataclass(frozen=True)
class Target:
    job: str
    address: str          # host:port as Prometheus dials it
    host: str             # inventory host name (or "local")
    deployment: str
    instance: str         # host/deployment-index, host/router, host/array-exporter

    @property
    def labels(self) -> dict[str, str]:
        return {"host": self.host, "deployment": self.deployment, "instance": self.instance}


def hostport(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def deployment_targets(plans, address_of, metrics_address: str, local: bool) -> list[Target]:
    """Targets of the plans; address_of(host name) -> how Prometheus reaches that host."""
    out: list[Target] = []
    loopback_only: list[str] = []
    for plan in plans:
        address = LOOPBACK if local else address_of(plan.host)
        if plan.role == Role.ENGINE:
            out.append(Target(ENGINE, hostport(address, plan.port), plan.host, plan.deployment,
                              f"{plan.host}/{plan.id}"))
        elif plan.role in (Role.LMCACHE_SERVER, Role.ROUTER) and plan.metrics_port:
            if not local and metrics_address == LOOPBACK:
                loopback_only.append(f"{plan.host} ({plan.unit})")
            job, name = (TIER, f"{plan.host}/{plan.deployment}-lmcache") if plan.is_server else \
                (ROUTER, f"{plan.host}/{plan.deployment}-router")
            out.append(Target(job, hostport(address, plan.metrics_port), plan.host, plan.deployment, name))
    if loopback_only:
        raise BadInput(f"the tier's and the router's metrics listen on 127.0.0.1 of {', '.join(loopback_only)}: "
                       "a Prometheus on another machine cannot scrape them",
                       "set serve.metrics_address: 0.0.0.0 in the inventory (or --metrics-address 0.0.0.0), "
                       "start the deployment again, then render the monitor files")
    return out


def array_targets(inventory, monitoring) -> list[Target]:
    """Each initiator of the inventory's arrays: its array exporter."""
    if inventory is None:
        return []
    names = dict.fromkeys(i for a in inventory.arrays for i in a.initiators)
    if names and monitoring.exporter_address == LOOPBACK:
        raise BadInput(f"the array exporters listen on 127.0.0.1 of {', '.join(names)} "
                       "(monitoring.exporter_address): a Prometheus elsewhere cannot scrape them",
                       "set monitoring.exporter_address: 0.0.0.0 and run fxctl provision again, or pass --no-arrays")
    return [Target(ARRAY, hostport(inventory.hosts[n].address, monitoring.exporter_port), n, "-",
                   f"{n}/array-exporter") for n in names]
