"""The suite refuses, in one line, to run on two workers when xdist drops its groups
(pytest-xdist#1386): grouped tests would share a server from both workers at once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

GROUPED = '''
import pytest

@pytest.mark.xdist_group("shared-server")
def test_one(): pass

@pytest.mark.xdist_group("shared-server")
def test_two(): pass
'''

# What pytest-xdist#1386 does: xdist names the group in each id ("...@shared-server"),
# then the ids reach the controller without it.
DROP_GROUPS = '''
import pytest

@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    for item in items:
        item._nodeid = item.nodeid.split("@")[0]
'''


def _run(tmp_path: Path, drop_groups: bool) -> subprocess.CompletedProcess[str]:
    conftest = "from tests.conftest import pytest_collection_finish, " \
        "pytest_xdist_node_collection_finished  # noqa: F401\n"
    (tmp_path / "conftest.py").write_text(conftest + (DROP_GROUPS if drop_groups else ""))
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
         "--dist", "loadgroup", "--rootdir", str(tmp_path), str(tmp_path),
         # its own base temp: a numbered one would rotate away the outer run's
         "--basetemp", str(tmp_path / "basetemp")],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)


@pytest.mark.servers  # two worker processes
def test_dropped_groups_stop_the_run_in_one_line(tmp_path):
    run = _run(tmp_path, drop_groups=True)
    out = run.stdout + run.stderr
    assert run.returncode == 4, out
    assert "INTERNALERROR" not in out and "Traceback" not in out, out
    [line] = [x for x in out.splitlines() if "xdist_group is not applied" in x]
    assert "2 tests" in line and "test_grouped.py::test_" in line and "pytest<9.2" in line


@pytest.mark.servers
def test_kept_groups_run(tmp_path):
    run = _run(tmp_path, drop_groups=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 passed" in run.stdout
