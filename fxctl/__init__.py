"""fxctl: deploy and tune tiered KV-cache LLM serving (GPU HBM -> DRAM L1 -> NVMe-oF L2)."""

__version__ = "0.1.0"
