"""Plain-script baseline: ``oshrun -n 2 python putget_script.py PLAN_JSON REPEATS``.

Runs putget_kernel.measure exactly as the cell does; PE 0 prints the result as JSON.
"""

import json
import sys

from shmem4py import shmem

from putget_kernel import measure

plan, repeats = json.loads(sys.argv[1]), int(sys.argv[2])
nbytes = max(size for size, _ in plan)
src, dst = shmem.zeros(nbytes, "uint8"), shmem.zeros(nbytes, "uint8")
result = measure(shmem, src, dst, plan, repeats)
if shmem.my_pe() == 0:
    print(json.dumps(result))
shmem.free(src)
shmem.free(dst)
