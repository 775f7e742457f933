"""bench/stats.py: the statistics the prediction benchmarks and their tests
report (bench/predict-vs-run, bench/gpu/train.py, tests/cost/gpu)."""
import random
import statistics


def spearman(x, y):
    """Spearman rank correlation of two equal-length sequences; tied values
    share their mean rank; 0 when either side is constant."""
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2
            i = j + 1
        return r
    rx, ry = ranks(x), ranks(y)
    mx, my = statistics.mean(rx), statistics.mean(ry)
    num = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    den = (sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry)) ** 0.5
    return num / den if den else 0.0


def split_half(samples, splits=200, seed=1):
    """How well a measurement ranks its items the same way twice, from the
    repeated samples of each item (a list of lists, at least 2 each). For
    each of `splits` random splits of every item's samples into two halves,
    the Spearman correlation between the items' medians over one half and
    over the other; returns (h, r, c): h the median of those, r = 2h / (1 + h)
    the reliability of all the samples (Spearman-Brown), c = sqrt(r) about the
    most a predictor that knew every item's true value could expect to reach
    against the medians of all the samples (classical attenuation). Small
    numbers say the measurement, not the model, limits a rank correlation."""
    if len(samples) < 3 or any(len(s) < 2 for s in samples):
        raise ValueError("split_half needs 3 or more items of 2 or more samples each")
    rng = random.Random(seed)
    hs = []
    for _ in range(splits):
        a, b = [], []
        for s in samples:
            k = list(s)
            rng.shuffle(k)
            a.append(statistics.median(k[:len(k) // 2]))
            b.append(statistics.median(k[len(k) // 2:]))
        hs.append(spearman(a, b))
    h = statistics.median(hs)
    r = 2 * h / (1 + h) if h > 0 else 0.0
    return h, r, r ** 0.5
