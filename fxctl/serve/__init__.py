"""`fxctl serve`: render, pre-flight, launch and supervise vLLM + LMCache (or the emulator)."""
