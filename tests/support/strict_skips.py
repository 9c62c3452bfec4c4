"""Under CI, a real test that skips fails the run (issue 26 #3).

The lab, vllm and lmcache tests skip on a developer's machine that lacks qemu, the serving env or LMCache.
In CI those are installed by .ci/setup, so a skip there means the set-up broke, and a green run would hide
that the real tests never ran. With CI set (CI=true, as CI runs), such a skip is reported as a failure that
names what is missing; a test module that skips as a whole at import (pytest.importorskip) fails too.
"""

from __future__ import annotations

import os

import pytest

STRICT_MARKERS = ("lab", "vllm", "lmcache")


def strict() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def need_tool(name: str, package: str) -> str:
    """The path of a program a fast-suite test runs (promtool, tmux): a skip without it on a developer's
    machine, a failure under CI (.ci/setup installs `package`)."""
    import shutil

    path = shutil.which(name)
    if path:
        return path
    if strict():
        pytest.fail(f"CI is set: {name} is missing (Debian's {package} package; .ci/setup installs it)")
    pytest.skip(f"{name} is missing (apt-get install {package})")


def skip_reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:   # (file, line, "Skipped: reason")
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not (report.skipped and strict()) or hasattr(report, "wasxfail"):
        return
    markers = [name for name in STRICT_MARKERS if item.get_closest_marker(name)]
    if markers:
        report.outcome = "failed"
        report.longrepr = (f"CI is set: this {'/'.join(markers)} test must run, but it skipped: "
                           f"{skip_reason(report)} (.ci/setup installs what it needs; see its output)")


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and strict() and isinstance(collector, pytest.Module):
        report.outcome = "failed"
        report.longrepr = (f"CI is set: {collector.nodeid} skipped as a whole at import: {skip_reason(report)} "
                           "(every test module must import in CI; .ci/setup installs what it needs)")
