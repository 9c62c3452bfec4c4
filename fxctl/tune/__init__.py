"""fxctl tune: the best operating point under an SLO, by measurement.

    session.py   tune(): a run from start (or resume) to outputs; progress through a callback, no printing
    search.py    concurrency searches as generators (bracket then bisect/interpolate; full grid)
    targets.py   where trials run: fxctl sim over HTTP, a running server, the engine in virtual time
    server.py    the server as a process group (start, /health, stop)
    store.py     the run directory: run.json, one file per trial, resume
    run.py       the outer loop over server settings, the trials, the no-offload baseline
    profiles.py  server settings as profile overrides; the tuned profile written with provenance
    report.py    best point, table, CSV, JSON, plots
"""

from __future__ import annotations


def __getattr__(name: str):
    if name == "tune":  # fxctl.tune.tune, as before it moved to fxctl.tune.session (imported on first use)
        from fxctl.tune.session import tune

        return tune
    raise AttributeError(name)
