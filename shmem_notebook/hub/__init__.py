"""A class on one server: the JupyterHub set-up the tests and the benchmark use (docs/classroom.md).

``jupyterhub_config.py`` is the hub's configuration (``jupyterhub -f``): LocalProcessSpawner, real
system users, a shared-password authenticator, the proxy from ``.hub/`` (scripts/setup.sh).
:mod:`.trial` drives such a hub as a class of students would, through its REST API and the
servers' kernel API: for the tests, the benchmark and an instructor's dry run before class.
"""

import os

__all__ = ["CONFIG", "CHECKOUT", "PROXY"]

#: the hub's configuration file
CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jupyterhub_config.py")
#: the checkout this package sits in (scripts/setup.sh installs the proxy into its .hub/)
CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(CONFIG)))
#: configurable-http-proxy as scripts/setup.sh installs it
PROXY = os.path.join(CHECKOUT, ".hub", "node_modules", ".bin", "configurable-http-proxy")
