"""tests/bench/test_stats.py: bench/stats.py, the statistics the prediction
benchmarks report (usage: test_stats.py SOURCE_DIR)."""
import os
import random
import sys

sys.path.insert(0, os.path.join(sys.argv[1], "bench"))
from stats import spearman, split_half  # noqa: E402

fails = 0


def check(ok, what):
    global fails
    if not ok:
        print("FAIL:", what)
        fails += 1


# Spearman: monotone, reversed, ties share their mean rank, constant side.
check(abs(spearman([1, 2, 3, 4], [10, 20, 30, 400]) - 1) < 1e-12, "monotone is 1")
check(abs(spearman([1, 2, 3, 4], [4, 3, 2, 1]) + 1) < 1e-12, "reversed is -1")
check(abs(spearman([1, 2, 2, 3], [1, 2, 3, 4]) - 0.9486832980505138) < 1e-12, "ties share their mean rank")
check(spearman([1, 1, 1], [1, 2, 3]) == 0.0, "a constant side gives 0")

# split_half: items far apart with small noise agree with themselves (1);
# items equal but for noise do not (about 0); in between, in between.
rng = random.Random(7)
apart = [[i + rng.uniform(-0.01, 0.01) for _ in range(8)] for i in range(19)]
h, r, c = split_half(apart)
check(h == 1.0 and r == 1.0 and c == 1.0, "well separated items: h, r, c = 1 (got %s)" % ((h, r, c),))
same = [[rng.gauss(0, 1) for _ in range(8)] for _ in range(19)]
h, r, c = split_half(same)
check(abs(h) < 0.3 and r < 0.5, "pure noise: h about 0 (got %.3f, r %.3f)" % (h, r))
mid = [[i * 0.1 + rng.gauss(0, 0.3) for _ in range(8)] for i in range(19)]
h, r, c = split_half(mid)
check(0.3 < h < 0.95 and h < r < c < 1, "noisy but ordered: 0 < h < r < c < 1 (got %s)" % ((h, r, c),))
check(split_half(mid) == split_half(mid), "seeded: the same answer twice")
try:
    split_half([[1, 2], [3]])
    check(False, "an item of one sample is refused")
except ValueError:
    pass

print("stats: %d check(s) failed" % fails if fails else "stats: all checks passed")
sys.exit(1 if fails else 0)
