"""The race detector on issue 48's held-out set (tests/race_heldout.py, 40 cells written blind).

Scored as ``bench/race_sets.py`` says; writes bench/race_heldout.json. A benchmark, not a CI test:
``python bench/race_heldout.py [--libraries oshmem sos] [--pes 2 4]`` (some 30-60 s a job). With
``--second``, the second blind set instead (tests/race_second_blind.py, 73 cells), into
bench/race_second_blind.json.
"""

import os
import sys

from race_sets import HERE, main  # puts tests/ on the path

if __name__ == "__main__":
    argv = sys.argv[1:]
    if "--second" in argv:
        argv.remove("--second")
        from race_second_blind import ARRAYS, CASES, RESET

        out = "race_second_blind.json"
    else:
        from race_heldout import ARRAYS, CASES, RESET  # tests/race_heldout.py, not this script

        out = "race_heldout.json"
    main(__doc__.split("\n\n")[0], os.path.join(HERE, out), CASES, ARRAYS, RESET, argv)
