"""The JupyterHub configuration of a class on one server (``jupyterhub -f`` this file; docs/classroom.md).

Each student is a real system user; LocalProcessSpawner starts their server as them. What varies
between sites comes from the environment of the hub:

- ``SHMEM_NOTEBOOK_HUB_DIR``: where the hub keeps its database, cookie secret and pid file;
- ``SHMEM_NOTEBOOK_HUB_PORT``: the port of the proxy (the hub's API is on the next one), on 127.0.0.1;
- ``SHMEM_NOTEBOOK_HUB_PASSWORD``: the class's shared password (at least 8 characters);
- ``SHMEM_NOTEBOOK_HUB_TOKEN``: the API token of the ``instructor`` service (an admin of the hub);
- ``SHMEM_NOTEBOOK_HUB_PYTHON``: the Python that runs each student's server and kernels, one every
  student may execute (default: the hub's own);
- ``SHMEM_NOTEBOOK_SITE``: the site policy every student's jobs get (:mod:`shmem_notebook.job.site`).
- ``SHMEM_NOTEBOOK_START_TIMEOUT``: how long a student's job may take to start (default here 180 s).
"""

import contextlib
import os
import pwd
import sys
from typing import Any

import psutil

from shmem_notebook.hub import PROXY
from shmem_notebook.launcher.listen import controller_ports

try:
    c = get_config()  # type: ignore[name-defined]  # JupyterHub's config loader provides it
except NameError:  # imported as a plain module (the layout tests import every module): a Config to fill
    from traitlets.config import Config

    c = Config()


def end_orphan_kernels(spawner: Any) -> None:  # a jupyterhub.spawner.Spawner (jupyterhub is untyped)
    """Once a student's server stopped, end their kernels that outlived it (one that hung on its way
    out, or whose server was killed): each job's watchdog then cleans up after its kernel."""
    uid = pwd.getpwnam(spawner.user.name).pw_uid
    for proc in psutil.process_iter(["uids", "cmdline"]):
        if proc.info["uids"] and proc.info["uids"].real == uid and "ipykernel_launcher" in (proc.info["cmdline"] or []):
            with contextlib.suppress(psutil.Error):
                proc.kill()


def fixed_port(spawner: Any) -> None:
    """Each student's server listens on a port of their own, 10000 + uid % span, below the ports the
    kernel hands out (32768 and up) and the ports TCP controllers take (``controller_ports``, 16384 and
    up): with thirty servers, controllers and PEs starting at once, a random port the hub picked was taken
    before the server bound it, and that server never came up."""
    below = controller_ports().start
    span = below - 10000 if below - 10000 >= 1000 else 20000  # no room below the controllers: as before
    spawner.port = 10000 + pwd.getpwnam(spawner.user.name).pw_uid % span


state = os.environ.get("SHMEM_NOTEBOOK_HUB_DIR", os.getcwd())
port = int(os.environ.get("SHMEM_NOTEBOOK_HUB_PORT", "8000"))
c.JupyterHub.ip, c.JupyterHub.port = "127.0.0.1", port
c.JupyterHub.hub_ip, c.JupyterHub.hub_port = "127.0.0.1", port + 1
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{port + 2}"
c.ConfigurableHTTPProxy.command = [PROXY]
c.ConfigurableHTTPProxy.pid_file = os.path.join(state, "proxy.pid")
c.JupyterHub.db_url = "sqlite:///" + os.path.join(state, "jupyterhub.sqlite")
c.JupyterHub.cookie_secret_file = os.path.join(state, "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = os.path.join(state, "jupyterhub.pid")
c.JupyterHub.cleanup_servers = True  # stopping the hub stops every student's server (and so their jobs)

# students: real system users (LocalProcessSpawner runs their servers as them), one shared password
c.JupyterHub.authenticator_class = "shared-password"
c.SharedPasswordAuthenticator.user_password = os.environ.get("SHMEM_NOTEBOOK_HUB_PASSWORD", "")
c.Authenticator.allow_all = True  # the system users are the class

c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [os.environ.get("SHMEM_NOTEBOOK_HUB_PYTHON", sys.executable), "-m", "jupyterhub.singleuser"]
c.Spawner.notebook_dir = "~"
c.Spawner.default_url = "/lab"
# kernels talk to their server over Unix sockets in the student's runtime folder, not TCP ports: with
# thirty servers starting kernels and jobs at once, a port the server picked for a kernel was taken
# before the kernel bound it (measured: bench/hub.py), and no other user can reach a socket there
c.Spawner.args = ["--KernelManager.transport=ipc"]
c.Spawner.post_stop_hook = end_orphan_kernels
c.Spawner.pre_spawn_hook = fixed_port
# a 2-core server starting thirty servers at once: be patient
c.Spawner.start_timeout = c.Spawner.http_timeout = 300
c.JupyterHub.concurrent_spawn_limit = 0
# a job's PEs get 180 s to register, not 60: thirty jobs starting at once on 2 cores took up to ~130 s
# (bench/hub.py; a start that ran out of time failed)
c.Spawner.environment = {"SHMEM_NOTEBOOK_START_TIMEOUT": os.environ.get("SHMEM_NOTEBOOK_START_TIMEOUT", "180")}
if "SHMEM_NOTEBOOK_SITE" in os.environ:
    c.Spawner.environment["SHMEM_NOTEBOOK_SITE"] = os.environ["SHMEM_NOTEBOOK_SITE"]

# the instructor: a service that is an admin of the hub (creates students, starts and stops servers)
token = os.environ.get("SHMEM_NOTEBOOK_HUB_TOKEN")
if token:
    c.JupyterHub.services = [{"name": "instructor", "api_token": token}]
    c.JupyterHub.load_roles = [{"name": "admin", "services": ["instructor"]}]
