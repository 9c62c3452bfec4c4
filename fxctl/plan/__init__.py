"""Capacity planning for tiered KV serving (`fxctl plan`): model shape -> KV bytes -> what fits in HBM ->
L1/L2 sizes for a reuse window -> the L2 bandwidth, SSDs and links a cold-recovery TTFT SLO needs ->
the operating point predicted by the emulator in virtual time.

shape (config.json or a profile's model section, pure) -> kv (vLLM's per-rank KV formula) -> capacity
(HBM, tiers, bandwidth; pure arithmetic) -> predict (the calibrated emulator) -> sweep (a generator fed
predictions) -> planned profile (what `fxctl serve` and `fxctl tune` take).
"""
