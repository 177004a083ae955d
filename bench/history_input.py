#!/usr/bin/env python3
"""Synthetic input for bench/history.sh: results files holding RUNS runs of
TESTS tests, made from one real run (TEMPLATE, a `linkperf run --json` file).

Every run is the template's run with its own start time (one minute apart
within its test), status ok, and each figure of its throughput, transaction
time and efficiency blocks times (1 + N(0, 1 %)) noise; the odd-numbered
tests' figures drop by 10 % from their middle run on, so that detection has
change points to find (TESTS / 2 tests, every metric: one each). The files
hold RUNS_PER_FILE runs each, as many nights of a mesh would.

Usage: history_input.py TEMPLATE OUT_DIR RUNS TESTS RUNS_PER_FILE SEED
Prints the files written, one a line.
"""

import datetime
import json
import os
import random
import sys

NOISE = 0.01
STEP = 0.9
BLOCKS = ("throughput", "transaction_time_us", "efficiency")


def scaled(block, factor, rng):
    """`block` (a dict of figures) with each number times factor and noise."""
    out = {}
    for k, v in block.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            out[k] = v
        elif isinstance(v, int):  # counts stay whole
            out[k] = max(0, round(v * factor * (1.0 + rng.gauss(0.0, NOISE))))
        else:
            out[k] = v * factor * (1.0 + rng.gauss(0.0, NOISE))
    return out


def main():
    template, out_dir, runs, tests, per_file, seed = sys.argv[1:7]
    runs, tests, per_file, seed = int(runs), int(tests), int(per_file), int(seed)
    if runs % tests or per_file % tests or runs % per_file:
        sys.exit("RUNS and RUNS_PER_FILE must be multiples of TESTS, RUNS of RUNS_PER_FILE")
    with open(template) as f:
        doc = json.load(f)
    base_test = doc["tests"][0]
    base_run = base_test["runs"][0]
    per_test = runs // tests
    per_test_per_file = per_file // tests
    rng = random.Random(seed)
    start = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    os.makedirs(out_dir, exist_ok=True)
    for n in range(runs // per_file):
        file_tests = []
        for k in range(tests):
            t = dict(base_test)
            t["name"] = f"{base_test['name']}-s{k:03d}"
            t_runs = []
            for r in range(per_test_per_file):
                j = n * per_test_per_file + r  # the run's place in its test's series
                factor = STEP if (k % 2 == 1 and j >= per_test // 2) else 1.0
                run = dict(base_run)
                run["run"] = r + 1
                run["started"] = (start + datetime.timedelta(minutes=j)).strftime(
                    "%Y-%m-%dT%H:%M:%S.000Z"
                )
                run["status"] = "ok"
                run["status_reasons"] = []
                for b in BLOCKS:
                    if isinstance(base_run.get(b), dict):
                        run[b] = scaled(base_run[b], factor, rng)
                t_runs.append(run)
            t["runs"] = t_runs
            file_tests.append(t)
        d = dict(doc)
        d["tests"] = file_tests
        path = os.path.join(out_dir, f"night-{n:04d}.json")
        with open(path, "w") as f:
            json.dump(d, f, separators=(",", ":"))
        print(path)


if __name__ == "__main__":
    main()
