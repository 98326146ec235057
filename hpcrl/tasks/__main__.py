"""``python -m hpcrl.tasks FILE.npz [EPISODES]``: write scripted demonstrations of the
corridor (:func:`hpcrl.tasks.corridor.record_walk`), the file ``algo.ppo.demos`` reads."""
from __future__ import annotations

import sys

from hpcrl.tasks.corridor import record_walk


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print("usage: python -m hpcrl.tasks FILE.npz [EPISODES]", file=sys.stderr)
        return 2
    rows = record_walk(argv[0], int(argv[1]) if len(argv) == 2 else 1)
    print(f"wrote {rows} rows of the corridor walk to {argv[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
