"""Headless Chromium for the tests that look at pages as a browser does (the notebook export in
tests/python/test_notebook.py, the links of tests/e2e that open through port-forwards)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Tuple

import pytest

#: Each Chromium run (one page, no network) takes 5-8 s here; a hung one fails the test.
CHROMIUM_TIMEOUT = 30


def chromium(*args: str) -> Tuple[str, float]:
    """Runs headless Chromium (Debian's `chromium`) with a fresh profile and home, deleted
    afterwards; returns its stdout and how long it took. Runs as root need --no-sandbox. Host
    names do not resolve (127.0.0.1 is excluded: the rules also catch IP literals, and the
    e2e tests load pages through port-forwards there), so nothing depends on the network
    (Debian's nbconvert points the export's require.js and MathJax at
    file:///usr/share/javascript/; another nbconvert's CDN URLs fail at once). Past
    CHROMIUM_TIMEOUT its process group is killed and the test fails."""
    binary = shutil.which("chromium")
    if binary is None:
        pytest.fail("Debian's `chromium` is not installed (tools/install-deps.sh installs it)",
                    pytrace=False)
    with tempfile.TemporaryDirectory(prefix="tfk8s-chromium-",
                                     ignore_cleanup_errors=True) as profile:
        command = [binary, "--headless=new", "--no-sandbox", "--disable-gpu",
                   f"--user-data-dir={profile}", "--no-first-run",
                   "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", *args]
        # Its crash reports database goes to $XDG_CONFIG_HOME/chromium whatever the profile.
        env = dict(os.environ, HOME=profile, XDG_CONFIG_HOME=os.path.join(profile, ".config"),
                   XDG_CACHE_HOME=os.path.join(profile, ".cache"))
        start = time.monotonic()
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=CHROMIUM_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            pytest.fail(f"chromium {' '.join(args)} took more than {CHROMIUM_TIMEOUT} s")
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        took = time.monotonic() - start
    tail = "\n".join(err.splitlines()[-20:])
    assert proc.returncode == 0, f"chromium exited with {proc.returncode}:\n{tail}"
    return out, took
