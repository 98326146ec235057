"""Where the test suite's time went, from the file ``HPCRL_TEST_COSTS=FILE pytest`` writes
(one JSON line per test: wall and CPU seconds, start time, xdist worker).

    python tools/test_costs.py FILE [--top 15]

Prints the suite's CPU seconds (the tests' own processes and those they waited for: what a
2-core CI machine pays), each worker's busy seconds and how long it sat idle before the
last test ended (a long test left for the end keeps one worker busy alone), and the
costliest tests. `.ci/run` prints it after the tests.
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def main() -> None:
    """Read the file, print the summary."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.file.read_text().splitlines() if line.strip()]
    if not rows:
        print(f"{args.file}: no tests recorded")
        return
    cpu = sum(r["cpu_s"] for r in rows)
    print(f"{len(rows)} tests, {cpu:,.0f} CPU seconds, {sum(r['wall_s'] for r in rows):,.0f} "
          f"test-seconds of wall")
    timed = [r for r in rows if "start" in r]
    if timed:
        first = min(r["start"] for r in timed)
        last = max(r["start"] + r["wall_s"] for r in timed)
        busy: dict[str, float] = defaultdict(float)
        ends: dict[str, float] = defaultdict(float)
        for r in timed:
            busy[r["worker"]] += r["wall_s"]
            ends[r["worker"]] = max(ends[r["worker"]], r["start"] + r["wall_s"])
        print(f"first test to last: {last - first:,.0f} s")
        for worker in sorted(busy):
            print(f"  {worker}: busy {busy[worker]:,.0f} s, done {last - ends[worker]:,.0f} s "
                  f"before the end")
    print(f"costliest {args.top} (CPU s, wall s):")
    for r in sorted(rows, key=lambda r: -r["cpu_s"])[:args.top]:
        print(f"  {r['cpu_s']:7.1f} {r['wall_s']:7.1f}  {r['test']}")


if __name__ == "__main__":
    main()
