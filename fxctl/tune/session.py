"""A tuning run from start to outputs: create (or resume) the run directory, run the tuner, write the summary.

The library prints nothing: progress goes to the `progress` object the caller passes (fxctl.tune.sweep's
TuneProgress; the CLI draws one line per trial), and Ctrl-C (or SIGTERM) raises `Interrupted`, which names the
run directory to resume.
"""

from __future__ import annotations

import signal
import threading
from dataclasses import asdict
from pathlib import Path

from fxctl.tune.report import assemble, write_outputs
from fxctl.tune.store import RunStore, default_run_dir
from fxctl.tune.sweep import TuneOptions, TuneProgress, Tuner, check_options


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during a run: finished trials are on disk in `run_dir`, and --resume continues."""

    def __init__(self, run_dir: Path):
        super().__init__(str(run_dir))
        self.run_dir = run_dir


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def tune(options: TuneOptions | None, run_dir: Path | None = None, resume: Path | None = None,
         progress: TuneProgress | None = None) -> dict:
    """Run (or, with `resume`, continue) a tuning run; the summary, with the paths of what it wrote."""
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
    except KeyboardInterrupt as exc:
        raise Interrupted(store.dir) from exc
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    summary = assemble(outcome, tuner.trials, asdict(options), store.dir, tuner.measured)
    return write_outputs(summary, tuner.trials, asdict(options), tuner.profile_path)
