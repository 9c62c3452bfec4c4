"""Playbooks: ordered stages of fxctl actions with gated thresholds (G1-G4), resumable, reported."""
