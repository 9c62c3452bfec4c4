"""pytest-xdist's scheduling for .ci/run (`-n 2 --dist loadscope`): the lab's tests are one unit of work.

One worker runs every test of tests/lab, in their order (the array's users before the module that rebuilds
it, the lab's stoppers last: tests/lab/conftest.py), with one lab; the other worker runs the rest of the suite
meanwhile, test by test (the lab mostly waits on its guests: a link cut, a reboot, the kernel's
reconnects). The lab's unit is the largest, so xdist hands it out first. xdist's own `loadgroup` cannot be
used: it marks a group by rewriting `item._nodeid`, which pytest 9 no longer reads.
"""

from __future__ import annotations

import pytest

LAB = "tests/lab/"


def scope_of(nodeid: str) -> str:
    """The unit of work a test belongs to: the whole lab package, or the test alone."""
    return LAB if nodeid.startswith(LAB) else nodeid


@pytest.hookimpl(optionalhook=True)   # only where pytest-xdist is installed (the test extra has it)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class LabAsOneUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return LabAsOneUnit(config, log)
