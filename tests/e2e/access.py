"""Logging in to what runs on the real node, as a user does: Jupyter over HTTP (its login form,
then the API) and sshd with OpenSSH's `ssh` driven by `sshpass` (password from the
environment, never from argv)."""

from __future__ import annotations

import http.cookiejar
import os
import shutil
import socket
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from typing import Optional, Tuple

SSH_OPTIONS = ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
               "-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR",
               "-o", "PreferredAuthentications=password,keyboard-interactive",
               "-o", "PubkeyAuthentication=no"]
# sshpass(1) exits 5 ("Invalid/incorrect password") when ssh asks for the password again, i.e.
# the server refused it; a connection failure would be ssh's 255.
SSHPASS_WRONG_PASSWORD = 5
T_CMD = 60  # one SSH command (unless given its own timeout) or one Jupyter login


def need_ssh_tools() -> None:
    missing = [tool for tool in ("ssh", "sshpass") if shutil.which(tool) is None]
    assert not missing, (f"{', '.join(missing)} not installed: run tools/install-deps.sh "
                         "(Debian packages openssh-client, sshpass)")


def ssh(host: str, user: str, password: str, command: str, stdin: Optional[str] = None,
        timeout: float = T_CMD, port: int = 22) -> Tuple[int, str, str]:
    """Runs ``command`` as ``user``@``host`` over SSH with password login (``stdin`` as its
    input); returns (exit code, stdout, stderr). sshpass reads the password from its
    environment, never from its argv."""
    r = subprocess.run(["sshpass", "-e", "ssh", *SSH_OPTIONS, "-p", str(port), f"{user}@{host}",
                        command],
                       env=dict(os.environ, SSHPASS=password), input=stdin if stdin else "",
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout)
    return r.returncode, r.stdout, r.stderr


def jupyter_status(base: str, password: str) -> int:
    """Logs in to Jupyter with ``password`` (a fresh cookie jar, no proxy); returns the status
    of GET /api/contents: 200 logged in, 403 refused."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                         urllib.request.HTTPCookieProcessor(jar))
    opener.open(base + "/login", timeout=T_CMD).read()
    xsrf = next((c.value for c in jar if c.name == "_xsrf"), "")
    form = urllib.parse.urlencode({"password": password, "_xsrf": xsrf}).encode()
    try:
        opener.open(base + "/login", data=form, timeout=T_CMD).read()
    except urllib.error.HTTPError:
        pass  # a refused login answers with an error page; the API call below tells
    try:
        return opener.open(base + "/api/contents", timeout=T_CMD).status
    except urllib.error.HTTPError as e:
        return e.code


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False
