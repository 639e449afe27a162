#!/usr/bin/env python3
"""How much of the binary stand-in's dependence one DP release of its second
moments can carry (issue 39; docs/benchmarks.md, "What a dense release can
carry").

DP-auto-GAN learns the dependence between the 1,071 features through dense
statistics: every DP-SGD step adds noise to a gradient over all of them. The
densest statistic a one-shot Gaussian release can give is the whole second
moment matrix S = sum over rows of x x^T (its diagonal holds the counts of
ones). For each of 20 target features this script fits the linear predictor
a moment-matching generator would teach a linear judge, ridge regression of
the target on the other 1,070 features computed from S alone, and reports
its ROC-AUC on the test rows, without noise and with the noise of one
Gaussian release of S at the given epsilons (delta 1e-5).

Sensitivity: each row is scaled to at most K ones (x * sqrt(min(1, K / k)),
k its count of ones), so adding or removing one row changes S by x x^T of
Frobenius norm ||x||^2 <= K; the upper triangle is released, whose L2 norm
is at most that. The noise multiplier s of one Gaussian release is the
server's calibration (`dpcurator privacy calibrate --epsilon E --delta 1e-5`).
With --thresholds, the released covariance's off-diagonal entries below t
noise standard deviations are also set to 0 before the ridge (a sparse
estimate: the stand-in's dependence comes from few parents a feature).

Diagnostics over the stand-in's rows, which are public (`build/bench/binary
data --out DIR` writes them); nothing here is a release.

  bench/binary_moment_bound.py DIR [--multipliers 1:3.7443,3.1:1.4] [--thresholds 0,2,3]
"""
import argparse
import numpy as np


def auroc(score, labels):
    """ROC-AUC by the rank-sum statistic, ties given their mean rank."""
    order = np.argsort(score, kind="mergesort")
    sorted_scores = score[order]
    ranks = np.empty(len(score))
    start = 0
    while start < len(score):
        end = start
        while end + 1 < len(score) and sorted_scores[end + 1] == sorted_scores[start]:
            end += 1
        ranks[order[start:end + 1]] = (start + end + 2) / 2.0
        start = end + 1
    positive = labels == 1
    n_pos = positive.sum()
    n_neg = len(labels) - n_pos
    return (ranks[positive].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)


def ridge_predictors(second_moment, rows, targets, ridge):
    """Per target, the weights of ridge regression on the other features,
    from the moments alone (covariance = S / n - mean mean^T, mean = diag S / n)."""
    mean = np.diag(second_moment) / rows
    covariance = second_moment / rows - np.outer(mean, mean)
    width = covariance.shape[0]
    predictors = {}
    for target in targets:
        rest = np.delete(np.arange(width), target)
        gram = covariance[np.ix_(rest, rest)] + ridge * np.eye(width - 1)
        predictors[target] = (rest, np.linalg.solve(gram, covariance[rest, target]))
    return predictors


def mean_auroc(predictors, test):
    return np.mean([auroc(test[:, rest] @ weights, test[:, target])
                    for target, (rest, weights) in predictors.items()])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", help="the directory `build/bench/binary data --out` wrote")
    parser.add_argument("--max-ones", type=float, default=64.0, help="K, the clip on a row's ones")
    parser.add_argument("--multipliers", default="1:3.7443,3.1:1.4",
                        help="epsilon:noise multiplier pairs (dpcurator privacy calibrate)")
    parser.add_argument("--ridges", default="0.3,1,3")
    parser.add_argument("--thresholds", default="0",
                        help="t: zero off-diagonal covariance entries below t noise sds (0: none)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    train = np.loadtxt(f"{args.dir}/train.csv", delimiter=",", skiprows=1)
    test = np.loadtxt(f"{args.dir}/test.csv", delimiter=",", skiprows=1)
    rows, width = train.shape
    rng = np.random.default_rng(args.seed)
    shares = train.mean(axis=0)
    targets = rng.choice(np.flatnonzero(shares > 0.02), 20, replace=False)

    reference = mean_auroc(ridge_predictors(train.T @ train, rows, targets, 1e-3), test)
    print(f"{rows} training rows, {width} features, 20 targets with share > 0.02")
    print("| moments | threshold | ridge | mean ROC-AUC (20) | below the exact moments' |")
    print("|---|---|---|---|---|")
    print(f"| exact | – | 0.001 | {reference:.3f} | 0 |")

    ones = train.sum(axis=1)
    scaled = train * np.sqrt(np.minimum(1.0, args.max_ones / np.maximum(ones, 1.0)))[:, None]
    clipped = scaled.T @ scaled
    for pair in args.multipliers.split(","):
        epsilon, multiplier = (float(v) for v in pair.split(":"))
        noise = np.triu(rng.normal(0.0, multiplier * args.max_ones, (width, width)))
        noisy = clipped + noise + np.triu(noise, 1).T
        sd = multiplier * args.max_ones
        mean = np.diag(noisy) / rows
        for threshold in (float(t) for t in args.thresholds.split(",")):
            moments = noisy
            if threshold > 0:
                centred = noisy - rows * np.outer(mean, mean)
                off_diagonal = ~np.eye(width, dtype=bool)
                centred[off_diagonal & (np.abs(centred) < threshold * sd)] = 0.0
                moments = centred + rows * np.outer(mean, mean)
                np.fill_diagonal(moments, np.diag(noisy))
            for ridge in (float(r) for r in args.ridges.split(",")):
                value = mean_auroc(ridge_predictors(moments, rows, targets, ridge), test)
                print(f"| one release at epsilon {epsilon:g} (s = {multiplier:g}, K = "
                      f"{args.max_ones:g}) | {threshold:g} | {ridge:g} | {value:.3f} | "
                      f"{reference - value:.3f} |", flush=True)


if __name__ == "__main__":
    main()
