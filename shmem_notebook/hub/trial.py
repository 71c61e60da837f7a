"""Drive a class on a real JupyterHub as its students would (root only: it makes system users).

:func:`make_students` creates system users; :class:`Hub` starts ``jupyterhub -f`` with
:data:`~shmem_notebook.hub.CONFIG` and talks to its REST API; a :class:`Student` logs in with the
class's password (a token from ``POST /hub/api/users/<name>/tokens``), starts their server and
opens kernels on it; a :class:`Kernel` executes cells through the server's kernel API (its
websocket), as JupyterLab does. :func:`lesson` reads a notebook's code cells for a class job size.
Used by tests/test_hub.py and bench/hub.py; an instructor can rehearse a class with it.
"""

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import urllib.request
import uuid
from collections.abc import Iterable
from typing import Any, Self

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from tornado.websocket import WebSocketClientConnection, websocket_connect

from . import CONFIG

__all__ = ["class_python", "Hub", "Student", "Kernel", "Reply", "make_students", "remove_students", "lesson"]

AsyncHTTPClient.configure(None, max_clients=200)  # every student's requests at once


def class_python(directory: str) -> str:
    """A Python every student may run that sees this environment's packages: this one, or (when its base
    sits where students cannot reach, e.g. under /root) a virtualenv in ``directory`` made from the
    system's Python of the same version, whose site-packages include this environment's."""
    if (
        subprocess.run(["runuser", "-u", "nobody", "--", sys.executable, "-c", "pass"], capture_output=True).returncode
        == 0
    ):
        return sys.executable
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    venv = os.path.join(directory, "class-venv")
    subprocess.run([f"/usr/bin/python{version}", "-m", "venv", "--without-pip", venv], check=True)
    purelib = sysconfig.get_paths()["purelib"]
    with open(os.path.join(venv, "lib", f"python{version}", "site-packages", "zz_class.pth"), "w") as fh:
        fh.write(f"import site; site.addsitedir({purelib!r})\n")  # its .pth files too (the editable install)
    for path in (directory, *(os.path.join(d, x) for d, dirs, _ in os.walk(directory) for x in dirs)):
        os.chmod(path, 0o755)
    return os.path.join(venv, "bin", "python")


def make_students(names: Iterable[str], notebooks: Iterable[str] = ()) -> None:
    """Create a system user (own group, home) for each name, with a copy of ``notebooks`` they own."""
    for name in names:
        subprocess.run(["useradd", "-m", "-U", "-s", "/bin/bash", name], check=True, capture_output=True)
        home = os.path.expanduser(f"~{name}")
        for path in notebooks:
            target = os.path.join(home, os.path.basename(path))
            shutil.copy(path, target)
            shutil.chown(target, name, name)


def remove_students(names: Iterable[str]) -> None:
    """Remove the users and their homes (their processes must be gone: :meth:`Hub.stop`)."""
    for name in names:
        subprocess.run(["userdel", "-r", "-f", name], capture_output=True)


def lesson(path: str, pes: int = 2) -> list[str]:
    """The code cells of notebook ``path``, its ``%shmem start -n N`` asking for ``pes`` PEs."""
    with open(path) as fh:
        cells = json.load(fh)["cells"]
    return [
        re.sub(r"(%shmem start -n )\d+", rf"\g<1>{pes}", "".join(c["source"]))
        for c in cells
        if c["cell_type"] == "code"
    ]


class Reply:
    """What a cell did: its output text (streams, results, the error), ``error`` (ename or None), seconds."""

    def __init__(self, text: str, error: str | None, seconds: float) -> None:
        self.text, self.error, self.seconds = text, error, seconds

    def __repr__(self) -> str:
        return f"<Reply error={self.error} {self.seconds:.1f} s: {self.text[:200]!r}>"


class Hub:
    """A JupyterHub run from :data:`CONFIG` in its own session, its state in ``state_dir``."""

    def __init__(
        self, state_dir: str, port: int, password: str, token: str, python: str | None = None, site: str | None = None
    ) -> None:
        self.state_dir, self.port, self.password, self.token = state_dir, port, password, token
        self.url = f"http://127.0.0.1:{port}"
        self.env = dict(
            os.environ,
            SHMEM_NOTEBOOK_HUB_DIR=state_dir,
            SHMEM_NOTEBOOK_HUB_PORT=str(port),
            SHMEM_NOTEBOOK_HUB_PASSWORD=password,
            SHMEM_NOTEBOOK_HUB_TOKEN=token,
            SHMEM_NOTEBOOK_HUB_PYTHON=python or sys.executable,
        )
        if site:
            self.env["SHMEM_NOTEBOOK_SITE"] = site
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 90.0) -> Self:
        """Start the hub and its proxy; return once its API answers."""
        log = open(os.path.join(self.state_dir, "hub.log"), "ab")  # the hub's, for its life
        self.process = subprocess.Popen(
            [sys.executable, "-m", "jupyterhub", "-f", CONFIG],
            cwd=self.state_dir,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the hub exited with code {self.process.returncode}: see {self.log_tail()}")
            with contextlib.suppress(OSError):
                urllib.request.urlopen(f"{self.url}/hub/api/", timeout=2).read()
                return self
            time.sleep(0.3)
        raise RuntimeError(f"the hub did not answer within {timeout:g} s: {self.log_tail()}")

    def log_tail(self, chars: int = 3000) -> str:
        with open(os.path.join(self.state_dir, "hub.log"), errors="replace") as fh:
            return fh.read()[-chars:]

    def stop(self, timeout: float = 120.0) -> None:
        """Stop the hub as an administrator would (SIGTERM): it stops every server, then its proxy."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)  # the hub's own session (not the servers')
            self.process.wait(10)

    async def api(
        self, method: str, path: str, token: str | None = None, body: Any = None, timeout: float = 120.0
    ) -> Any:
        """A request to the hub's REST API (``path`` after ``/hub/api``), as ``token`` (default: the
        instructor's); the decoded answer (None when empty)."""
        return await request(self.url + "/hub/api" + path, method, token or self.token, body, timeout)

    async def add_students(self, names: Iterable[str]) -> None:
        """The instructor adds the class to the hub."""
        await self.api("POST", "/users", body={"usernames": list(names)})

    async def login(self, name: str, password: str | None = None) -> "Student":
        """``name`` logs in with the class's password: their :class:`Student`, holding a token."""
        body = {"auth": {"username": name, "password": password or self.password}, "note": "class"}
        answer = await request(f"{self.url}/hub/api/users/{name}/tokens", "POST", None, body)
        return Student(self, name, answer["token"])


async def request(
    url: str, method: str = "GET", token: str | None = None, body: Any = None, timeout: float = 120.0
) -> Any:
    """A request to the hub or a server; the decoded JSON answer (None when empty)."""
    headers = {"Authorization": f"token {token}"} if token else {}
    data = None if body is None else json.dumps(body)
    if data is None and method in ("POST", "PUT", "PATCH"):
        data = ""
    answer = await AsyncHTTPClient().fetch(
        HTTPRequest(url, method, headers=headers, body=data, request_timeout=timeout, connect_timeout=timeout)
    )
    return json.loads(answer.body) if answer.body else None


class Student:
    """One student on the hub: ``name`` and the token they logged in with."""

    def __init__(self, hub: Hub, name: str, token: str) -> None:
        self.hub, self.name, self.token = hub, name, token
        self.server = f"{hub.url}/user/{name}"

    async def api(self, method: str, path: str, body: Any = None, timeout: float = 120.0) -> Any:
        """A request to the student's own server (``path`` after ``/user/<name>``)."""
        return await request(self.server + path, method, self.token, body, timeout)

    async def start_server(self, timeout: float = 300.0) -> float:
        """Ask the hub for their server and wait until it is ready; the seconds it took."""
        t0 = time.monotonic()
        with contextlib.suppress(HTTPClientError):  # 400: already running
            await self.hub.api("POST", f"/users/{self.name}/server", token=self.token)
        while time.monotonic() - t0 < timeout:
            model = await self.hub.api("GET", f"/users/{self.name}", token=self.token)
            if (model.get("servers") or {}).get("", {}).get("ready"):
                return time.monotonic() - t0
            await asyncio.sleep(0.5)
        raise TimeoutError(f"{self.name}'s server was not ready within {timeout:g} s")

    async def kernel(self) -> "Kernel":
        """A new Python kernel on their server, connected."""
        model = await self.api("POST", "/api/kernels", {"name": "python3"})
        kernel = Kernel(self, model["id"])
        await kernel.connect()
        return kernel


class Kernel:
    """A kernel of a student's server, driven through its websocket (the server's kernel API)."""

    def __init__(self, student: Student, kernel_id: str) -> None:
        self.student, self.id = student, kernel_id
        self.session, self.reconnects = uuid.uuid4().hex, 0
        self.ws: WebSocketClientConnection | None = None

    def _socket(self) -> WebSocketClientConnection:
        if self.ws is None:
            raise RuntimeError(f"kernel {self.id} is not connected: await its connect() first")
        return self.ws

    async def connect(self) -> None:
        url = (
            self.student.server.replace("http", "ws", 1) + f"/api/kernels/{self.id}/channels?session_id={self.session}"
        )
        headers = {"Authorization": f"token {self.student.token}"}
        self.ws = await websocket_connect(HTTPRequest(url, headers=headers, request_timeout=120, connect_timeout=120))

    async def execute(self, code: str, timeout: float = 300.0) -> Reply:
        """Run ``code``; its :class:`Reply` once the kernel is idle again."""
        msg_id, t0 = uuid.uuid4().hex, time.monotonic()
        header = {"msg_id": msg_id, "username": self.student.name, "session": self.session, "version": "5.3"}
        content = {"code": code, "silent": False, "store_history": True, "user_expressions": {}, "allow_stdin": False}
        message = {"header": dict(header, msg_type="execute_request"), "parent_header": {}, "metadata": {}}
        await self._socket().write_message(json.dumps(dict(message, content=content, channel="shell")))
        text: list[str] = []
        error: str | None = None
        replied, idle = False, False
        while not (replied and idle):
            left = timeout - (time.monotonic() - t0)
            raw = await asyncio.wait_for(self._socket().read_message(), max(left, 0.01))
            if raw is None:  # as JupyterLab does: reconnect; the server kept this session's messages
                self.reconnects += 1
                if self.reconnects > 3:
                    raise ConnectionError(f"{self.student.name}'s kernel {self.id} closed its websocket 4 times")
                await self.connect()
                continue
            msg = json.loads(raw)
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, body = msg["msg_type"], msg["content"]
            if kind == "stream":
                text.append(body["text"])
            elif kind in ("execute_result", "display_data"):
                text.append(body.get("data", {}).get("text/plain", "") + "\n")
            elif kind == "error":
                error = body["ename"]
                text.append(f"{body['ename']}: {body['evalue']}\n")
            elif kind == "execute_reply":
                replied = True
            elif kind == "status" and body["execution_state"] == "idle":
                idle = True
        return Reply("".join(text), error, time.monotonic() - t0)

    async def interrupt(self) -> None:
        await self.student.api("POST", f"/api/kernels/{self.id}/interrupt")

    async def shutdown(self) -> None:
        if self.ws is not None:
            self.ws.close()
        with contextlib.suppress(HTTPClientError):
            await self.student.api("DELETE", f"/api/kernels/{self.id}")
