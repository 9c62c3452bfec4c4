"""fxctl tune: the best operating point under an SLO, by measurement.

    search.py    concurrency searches as generators (bracket then bisect/interpolate; full grid)
    targets.py   where trials run: fxctl sim over HTTP, a running server, the engine in virtual time
    server.py    the server as a process group (start, /health, stop)
    store.py     the run directory: run.json, one file per trial, resume
    run.py       the outer loop over server settings, the trials, the no-offload baseline
    profiles.py  server settings as profile overrides; the tuned profile written with provenance
    report.py    best point, table, CSV, JSON, plots
"""

from __future__ import annotations

import signal
import sys
import threading
from dataclasses import asdict
from pathlib import Path


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def tune(options, run_dir: Path | None = None, resume: Path | None = None, progress=None) -> dict:
    """Run (or resume) a tuning run; the summary, with the paths of what it wrote."""
    from fxctl.tune.report import assemble, write_outputs
    from fxctl.tune.run import TuneOptions, Tuner, check_options
    from fxctl.tune.store import RunStore, default_run_dir

    if resume is not None:
        store, saved = RunStore.open(resume)
        options = TuneOptions(**saved)
    else:
        check_options(options)
        store = RunStore.create(run_dir or default_run_dir(), asdict(options))
    tuner = Tuner(options, store, progress)
    previous = None
    if threading.current_thread() is threading.main_thread():   # SIGTERM stops the server too
        previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        outcome = tuner.run()
    except KeyboardInterrupt:
        print(f"\ninterrupted: finished trials are kept; resume with --resume {store.dir}", file=sys.stderr)
        raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    summary = assemble(outcome, tuner.trials, asdict(options), store.dir, tuner.measured)
    return write_outputs(summary, tuner.trials, asdict(options), tuner.profile_path)
