"""The race detector on the ports of RMARaceBench's OpenSHMEM tests (tests/race_rmaracebench.py).

Scored as ``bench/race_sets.py`` says, each library's cases chosen by ``for_library``; writes
bench/race_rmaracebench.json. A benchmark, not a CI test:
``python bench/race_rmaracebench.py [--libraries oshmem sos] [--pes 2 4]`` (some 30-60 s a job).
"""

import functools
import os

from race_sets import HERE, main  # puts tests/ on the path

if __name__ == "__main__":
    from race_rmaracebench import ARRAYS, CASES, RESET, for_library  # tests/race_rmaracebench.py

    chosen = functools.partial(for_library, CASES)
    main(__doc__.split("\n\n")[0], os.path.join(HERE, "race_rmaracebench.json"), chosen, ARRAYS, RESET)
