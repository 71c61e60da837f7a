"""The replay widget in a real browser: JupyterLab and Debian's headless chromium (as the
inspector's browser test). A 4-PE job traces a ring allgather; the test asserts the replay's
play button, slider and figure rendered, moves to the last step from the kernel, and saves the
screenshot tests/artifacts/replay.png (docs/replay.png, shown in docs/teams.md)."""

import time

import pytest
from test_inspector_browser import ARTIFACTS, make_driver, notebook_lab, open_and_run_all, wait_for

pytestmark = pytest.mark.pe

NOTEBOOK = [
    "%load_ext shmem_notebook",
    "%shmem start -n 4 --heap 64M",
    "%%pxshmem --trace mine=int64[2] everyone=int64[8]\n"
    "mine[:] = me + 1\n"
    "everyone[:] = 0\n"
    "shmem.barrier_all()\n"
    "collectives.fcollect(everyone, mine, algorithm='ring')",
    "replay = %shmem replay --array everyone --array mine\nreplay",
    "replay.slider.value = 2\nprint('REPLAY AT', replay.index)",  # the slider counts from 1, as the title
]

RENDERED = """
const root = document.querySelector('.shmem-replay');
if (!root) return null;
const img = root.querySelector('img');
const r = {
  figure: !!(img && img.complete && img.naturalWidth > 400),
  play: root.querySelectorAll('button').length,
  slider: root.querySelectorAll('.widget-slider, .slider').length,
  title: root.innerText,
};
return (r.figure && r.play > 0 && r.slider > 0) ? r : null;
"""


@pytest.fixture
def lab(tmp_path):
    yield from notebook_lab(tmp_path, "replay.ipynb", NOTEBOOK)


@pytest.mark.timeout(900)
def test_replay_renders_in_jupyterlab(lab, tmp_path):
    from selenium.webdriver.common.by import By

    ARTIFACTS.mkdir(exist_ok=True)
    driver = make_driver(tmp_path / "chromium-profile")
    try:
        open_and_run_all(driver, lab, "replay.ipynb")
        state = wait_for(driver, RENDERED, "the replay widget (play button, slider, figure) to render", 300, lab)
        lab.remember_descendants()
        assert "fcollect (ring)" in state["title"], state["title"]
        wait_for(
            driver,
            "return document.body.innerText.includes('REPLAY AT 1')",
            "the slider moved from the kernel to step 2",
            120,
            lab,
        )
        wait_for(
            driver,
            "const r = document.querySelector('.shmem-replay');return r && r.innerText.includes('step 2 of 3');",
            "the replay's title to show the ring's step 2 of 3",
            60,
            lab,
        )
        replay = driver.find_element(By.CSS_SELECTOR, ".shmem-replay")
        driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", replay)
        time.sleep(1)
        shot = ARTIFACTS / "replay.png"
        replay.screenshot(str(shot))
        assert shot.stat().st_size > 20_000, f"the screenshot {shot} looks empty"
    finally:
        driver.quit()
