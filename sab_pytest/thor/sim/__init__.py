"""The embedded symbolic AI2-THOR engine: ``Controller`` speaks ai2thor 5.0.0's API over the real
iTHOR scene contents, with deterministic stand-ins for what Unity's physics decides.

Modules: ``controller`` (the API and events), ``actions`` (handlers, parameters, error wording),
``physics_rules`` (contextual interactions), ``world`` (state and receptacle relations), ``geometry``
(reachable grid, visibility), ``render`` (the schematic frame).
"""

from sab_pytest.thor.sim.controller import Controller, SimEvent

__all__ = ["Controller", "SimEvent"]
