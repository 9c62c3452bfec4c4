"""NVMe-oF RAID0 from bare drives to a mounted, persistent, verified KV tier."""
