"""The inspector in a real browser: JupyterLab on 127.0.0.1, Debian's headless chromium via selenium.

A notebook starts a 4-PE job and displays the inspector; the test asserts the
heap map, the heatmap and the PE state table rendered in the DOM, clicks
Refresh, and saves screenshots to tests/artifacts/inspector.png (the
inspector) and tests/artifacts/inspector-page.png (the whole page). Uses
/usr/bin/chromium and /usr/bin/chromedriver (Debian packages chromium,
chromium-driver); nothing is downloaded. The server, the kernel, the job and
the browser are all stopped at the end.
"""

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import psutil
import pytest
from nbformat.v4 import new_code_cell, new_notebook

pytestmark = pytest.mark.pe

ARTIFACTS = Path(__file__).parent / "artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SETUP_HINT = "install the Debian packages chromium and chromium-driver (scripts/setup.sh does)"

NOTEBOOK = [
    "%load_ext shmem_notebook",
    "%shmem start -n 4 --heap 64M",
    "%%pxshmem squares=float64[12] grid=float64[6,8]\n"
    "squares[:] = np.linspace(0, 1, 12) ** 2\n"
    "if me == 3:\n"
    "    squares[7] += 0.5\n"
    "grid[:] = 100 * me + np.arange(48).reshape(6, 8)\n"
    "halo = shmem.zeros(16, dtype='int32')\n"
    "halo[:] = me\n"
    "shmem.barrier_all()\n"
    "print(f'PE {me}: squares[7] = {squares[7]:.3f}')",
    "insp = %shmem inspect --array squares",
    "print('INSPECTOR', insp.refreshes)",
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url, method="GET"):
    req = urllib.request.Request(url, method=method)
    with urllib.request.urlopen(req, timeout=10) as resp:
        body = resp.read()
    return json.loads(body) if body else None


class Lab:
    """A JupyterLab server of our own: random port and token, isolated config and runtime dirs."""

    def __init__(self, root):
        self.root = root
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.base = f"http://127.0.0.1:{self.port}"
        home = root / ".home"
        settings = home / "settings" / "@jupyterlab" / "notebook-extension"
        settings.mkdir(parents=True)
        # attach every cell to the DOM, so the whole inspector is there to assert and to screenshot
        (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
        self.env = dict(
            os.environ,
            JUPYTER_CONFIG_DIR=str(home / "config"),
            JUPYTER_RUNTIME_DIR=str(home / "runtime"),
            JUPYTERLAB_SETTINGS_DIR=str(home / "settings"),
            JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
        )
        self.log_path = root / "jupyterlab.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyterlab",
                "--no-browser",
                "--ip=127.0.0.1",
                f"--port={self.port}",
                "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={self.token}",
                f"--ServerApp.root_dir={root}",
                "--LabApp.expose_app_in_browser=True",
                "--LabApp.news_url=",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
                "--LabApp.extension_manager=readonly",
            ]
            + (["--allow-root"] if os.geteuid() == 0 else []),
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.descendants = {}

    def api(self, path, method="GET"):
        return get_json(f"{self.base}{path}{'&' if '?' in path else '?'}token={self.token}", method)

    def wait_ready(self, timeout=180):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"JupyterLab exited with code {self.proc.returncode}:\n{self.log_tail()}")
            try:
                self.api("/api/status")
                return
            except OSError:
                time.sleep(0.5)
        raise AssertionError(f"JupyterLab did not answer on {self.base} within {timeout} s:\n{self.log_tail()}")

    def log_tail(self, lines=40):
        self.log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def remember_descendants(self):
        """Note the kernel and everything it started (the job), to be sure they end."""
        try:
            self.descendants.update({p.pid: p for p in psutil.Process(self.proc.pid).children(recursive=True)})
        except psutil.Error:
            pass

    def stop_job(self, timeout=60):
        """Run ``%shmem stop`` in every kernel through its connection file (a second client)."""
        from jupyter_client import BlockingKernelClient

        for path in Path(self.env["JUPYTER_RUNTIME_DIR"]).glob("kernel-*.json"):
            client = BlockingKernelClient(connection_file=str(path))
            client.load_connection_file()
            client.start_channels()
            try:
                client.execute_interactive("%shmem stop", timeout=timeout)
            except Exception:
                pass
            finally:
                client.stop_channels()

    def stop(self):
        self.remember_descendants()
        try:
            for kernel in self.api("/api/kernels") or []:
                self.api(f"/api/kernels/{kernel['id']}", method="DELETE")
        except OSError:
            pass
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        for p in self.descendants.values():  # only what this server started
            try:
                p.wait(15)
            except psutil.TimeoutExpired:
                p.kill()
            except psutil.Error:
                pass
        self.log.close()


def make_driver(profile):
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    for path in (CHROMIUM, CHROMEDRIVER):
        assert os.access(path, os.X_OK), f"{path} is missing: {SETUP_HINT}"
    options = Options()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        "--window-size=1400,3000",
        "--force-device-scale-factor=1",
    ):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


def wait_for(driver, script, what, timeout, lab):
    """Poll a JavaScript predicate until it is truthy; fail with a screenshot and the server log."""
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        try:
            value = driver.execute_script(script)
        except Exception as exc:  # page still loading
            value = f"error: {exc}"
        if value and not (isinstance(value, str) and value.startswith("error:")):
            return value
        time.sleep(0.5)
    shot = ARTIFACTS / "inspector-failure.png"
    driver.save_screenshot(str(shot))
    raise AssertionError(
        f"timed out after {timeout} s waiting for {what} (last: {value!r}); "
        f"page screenshot: {shot}; JupyterLab log:\n{lab.log_tail()}"
    )


KERNEL_IDLE = """
const app = window.jupyterapp;
const w = app && app.shell.currentWidget;
const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
return !!(k && k.connectionStatus === 'connected' && k.status === 'idle' && w.content && w.content.widgets.length);
"""

RENDERED = """
const root = document.querySelector('.shmem-inspector');
if (!root) return null;
const loaded = sel => { const i = root.querySelector(sel); return !!(i && i.complete && i.naturalWidth > 200); };
const table = root.querySelector('table.shmem-pe-state');
const heap = root.querySelector('img.shmem-heapmap');
const r = {
  heapmap: loaded('img.shmem-heapmap'),
  heatmap: loaded('img.shmem-heatmap'),
  diff: loaded('img.shmem-diff'),
  pe_rows: table ? table.querySelectorAll('tbody tr').length : 0,
  states: table ? Array.from(table.querySelectorAll('tbody tr td:nth-child(2) .shmem-badge'))
                    .map(b => b.innerText.trim()) : [],
  title: (root.querySelector('.shmem-title') || {}).innerText || '',
  diff_text: (root.querySelector('.shmem-diff-summary') || {}).innerText || '',
  values_cells: root.querySelectorAll('table.shmem-values td.diff').length,
  tails: table ? Array.from(table.querySelectorAll('tbody tr td:last-child')).map(td => td.innerText.trim()) : [],
  heap_size: heap ? [heap.naturalWidth, heap.naturalHeight] : null,
};
return (r.heapmap && r.heatmap && r.diff && r.pe_rows === 4) ? r : null;
"""


def notebook_lab(tmp_path, name, cells):
    """A JupyterLab serving the notebook ``name`` made of ``cells`` (a generator, for fixtures);
    afterwards the notebook's job and the server are stopped."""
    nb = new_notebook(
        cells=[new_code_cell(src) for src in cells],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )
    nbformat.write(nb, tmp_path / name)
    server = Lab(tmp_path)
    try:
        server.wait_ready()
        yield server
    finally:
        try:
            server.stop_job()
        finally:
            server.stop()


def open_and_run_all(driver, lab, name):
    """Open the notebook ``name`` in chromium, wait for its idle kernel, run every cell."""
    driver.set_page_load_timeout(180)
    driver.get(f"{lab.base}/lab/tree/{name}?token={lab.token}")
    wait_for(driver, KERNEL_IDLE, "JupyterLab to open the notebook with an idle python3 kernel", 240, lab)
    driver.execute_script("window.jupyterapp.commands.execute('notebook:run-all-cells');")
    lab.remember_descendants()


@pytest.fixture
def lab(tmp_path):
    yield from notebook_lab(tmp_path, "inspector.ipynb", NOTEBOOK)


@pytest.mark.timeout(900)
def test_inspector_renders_in_jupyterlab(lab, tmp_path):
    from selenium.webdriver.common.by import By

    ARTIFACTS.mkdir(exist_ok=True)
    driver = make_driver(tmp_path / "chromium-profile")
    try:
        open_and_run_all(driver, lab, "inspector.ipynb")
        state = wait_for(
            driver,
            RENDERED,
            "the inspector widget (heap map, heatmap, diff image and a 4-row PE state table) to render",
            300,
            lab,
        )
        lab.remember_descendants()
        assert state["states"] == ["idle"] * 4, f"every PE should be idle: {state['states']}"
        assert "refresh 1" in state["title"] and "4 PEs" in state["title"], state["title"]
        assert "squares: PE 3 differs from the consensus at 1 of 12 elements" in state["diff_text"], state["diff_text"]
        assert state["tails"] == [f"PE {pe}: squares[7] = {0.905 if pe == 3 else 0.405:.3f}" for pe in range(4)], state[
            "tails"
        ]
        assert state["values_cells"] == 1, "exactly one cell of the exact-values table is marked as differing"
        assert state["heap_size"][0] >= 800, f"the heap map image is too small to read: {state['heap_size']}"

        # a click on Refresh goes through the kernel and comes back as refresh 2
        driver.find_element(By.CSS_SELECTOR, ".shmem-inspector button").click()
        wait_for(
            driver,
            "const t = document.querySelector('.shmem-inspector .shmem-title');"
            "return t && t.innerText.includes('refresh 2');",
            "the Refresh button to redraw the inspector (title 'refresh 2')",
            120,
            lab,
        )

        inspector = driver.find_element(By.CSS_SELECTOR, ".shmem-inspector")
        driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", inspector)
        time.sleep(1)
        shot = ARTIFACTS / "inspector.png"
        inspector.screenshot(str(shot))
        driver.save_screenshot(str(ARTIFACTS / "inspector-page.png"))
        assert shot.stat().st_size > 20_000, f"the screenshot {shot} looks empty"
    finally:
        driver.quit()


def test_pe_state_table_does_not_wrap_in_a_narrow_browser(tmp_path):
    """With a 1e6-element array and a narrow page, "PE 0" and "0.098 s" stay on one line each."""
    import shmem_notebook
    from shmem_notebook.inspector import gather_snapshot
    from shmem_notebook.inspector.tables import state_table

    with shmem_notebook.Job(2, heap="64M").start() as job:
        job.run(
            "big = shmem.zeros(1_000_000)\nbig[:] = me\nprint('a fairly long line of output from PE', me, '-' * 60)",
            stdout=open(os.devnull, "w"),
        )
        page = tmp_path / "state.html"
        page.write_text(f"<html><body style='width:560px'>{state_table(gather_snapshot(job))}</body></html>")
    driver = make_driver(tmp_path / "profile")
    try:
        driver.set_window_size(700, 900)
        driver.get(page.as_uri())
        lines = driver.execute_script(
            "const out = {};"
            "for (const td of document.querySelectorAll('table.shmem-pe-state tbody td')) {"
            "  if (td.querySelector('pre, small')) continue;"
            "  const r = document.createRange(); r.selectNodeContents(td);"
            "  const tops = new Set(Array.from(r.getClientRects()).map(x => Math.round(x.top)));"
            "  out[td.textContent] = tops.size; }"
            "return out;"
        )
    finally:
        driver.quit()
    assert "PE 0" in lines and any(text.endswith(" s") for text in lines), lines
    assert {text: n for text, n in lines.items() if n > 1} == {}, "cells broken over lines"
