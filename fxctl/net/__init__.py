"""`fxctl net`: RoCEv2 lossless networking per NIC vendor (desired state, recipe, persistence, verify, bench)."""
