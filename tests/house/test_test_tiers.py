"""How the suite runs: a module marked with an ``xdist_group`` keeps all its tests on one of the two workers, so its
module- and session-scoped fixtures (the whole site, the benchmark bundle) are built once, not once per worker."""
from __future__ import annotations

import re
import subprocess
import sys
import textwrap

from corpus import ROOT


def test_a_grouped_module_runs_on_one_worker(tmp_path):
    (tmp_path / "test_grouped.py").write_text(textwrap.dedent("""
        import time, pytest
        pytestmark = pytest.mark.xdist_group("grouped")
        @pytest.mark.parametrize("i", range(6))
        def test_grouped(i):
            time.sleep(0.1)
    """))
    (tmp_path / "test_free.py").write_text(textwrap.dedent("""
        import time, pytest
        @pytest.mark.parametrize("i", range(6))
        def test_free(i):
            time.sleep(0.1)
    """))
    # the Makefile's way of running tests in parallel
    parallel = re.search(r"^PARALLEL := (.+)$", (ROOT / "Makefile").read_text(), re.M).group(1).split()
    done = subprocess.run([sys.executable, "-m", "pytest", *parallel, "-v", "-p", "no:cacheprovider", str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    workers = {m.group(1) for m in re.finditer(r"^\[(gw\d)\].*test_grouped", done.stdout, re.M)}
    assert len(workers) == 1, done.stdout
    assert len(re.findall(r"^\[gw\d\].*PASSED", done.stdout, re.M)) == 12
