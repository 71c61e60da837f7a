"""The race detector on issue 48's held-out set (tests/race_heldout.py, 40 cells written blind).

Scored as ``bench/race_sets.py`` says; writes bench/race_heldout.json. A benchmark, not a CI test:
``python bench/race_heldout.py [--libraries oshmem sos] [--pes 2 4]`` (some 30-60 s a job).
"""

import os

from race_sets import HERE, main  # puts tests/ on the path

if __name__ == "__main__":
    from race_heldout import ARRAYS, CASES, RESET  # tests/race_heldout.py, not this script

    main(__doc__.split("\n\n")[0], os.path.join(HERE, "race_heldout.json"), CASES, ARRAYS, RESET)
