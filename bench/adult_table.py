#!/usr/bin/env python3
"""The table of bench/adult.sh --methods/--epsilons/--seeds (standard library only).

  adult_table.py DIR METHODS EPSILONS SEEDS

reads DIR/<method>-eps<epsilon>-seed<seed>.json (`dpcurator demo --json`) and
prints one Markdown row per method and epsilon: the mean over the seeds (each
seed's value after it) of
  - the worst gap to real, in percentage points, over every shape check the
    evaluator names (hours-per-week = 40, capital-gain = 0, education agrees
    with education-num, relationship = Husband and sex = Female), and which;
  - the education <-> education-num agreement;
  - the 3-way marginal distance (mean 2 TV over the evaluator's triples);
  - logistic-regression TSTR ROC-AUC;
  - naive Bayes TSTR ROC-AUC (the classifier that sees hard zeros, issue 38)
    and random-forest TSTR ROC-AUC;
  - the average TSTR ROC-AUC over the evaluator's classifiers (logistic
    regression, boosted trees, naive Bayes, random forest since issue 38);
  - the run's wall time (local server, upload, release, fit, sample, eval).
Then the real training rows' own values (the non-private floor).
"""
import json
import os
import statistics
import sys

NAMES = {"aim": "AIM", "mst": "MST", "merf": "DP-MERF", "pearl": "PEARL",
         "autogan": "DP-auto-GAN", "kernel": "DP-kernel"}


def load(path):
    with open(path) as f:
        return json.load(f)


def shape_gaps(metrics):
    named = metrics["shape_checks"]["named"]
    gaps = [(abs(n["value"] - n["real"]) * 100, n["name"]) for n in named]
    return max(gaps), {n["name"]: n["value"] for n in named}


def tstr_auc(evaluation, classifier):
    for row in evaluation["utility"]:
        if row["train_source"] == "synthetic" and row["classifier"] == classifier:
            return row["roc_auc"]
    return float("nan")


def cell(values, fmt):
    mean = statistics.fmean(values)
    if len(values) == 1:
        return fmt.format(mean)
    return fmt.format(mean) + " (" + ", ".join(fmt.format(v) for v in values) + ")"


def main():
    out, methods, epsilons, seeds = sys.argv[1], *[a.split(",") for a in sys.argv[2:5]]
    print("| method | ε | worst shape-check gap, points (check) | education ↔ education-num "
          "| 3-way 2·TV | LR TSTR ROC-AUC | NB TSTR ROC-AUC | RF TSTR ROC-AUC "
          "| average TSTR ROC-AUC | wall s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    real = None
    for epsilon in epsilons:
        for method in methods:
            worst, education, three_way, lr, average, wall = [], [], [], [], [], []
            nb, rf = [], []
            worst_names = []
            for seed in seeds:
                path = os.path.join(out, f"{method}-eps{epsilon}-seed{seed}.json")
                if not os.path.exists(path):
                    continue
                try:
                    run = load(path)
                except ValueError:  # a run still going, or one that failed
                    continue
                result = run["results"][0]
                evaluation = result["evaluation"]
                metrics = evaluation["paper_metrics"]
                (gap, name), values = shape_gaps(metrics)
                worst.append(gap)
                worst_names.append(name)
                education.append(100 * values.get("education agrees with education-num",
                                                  float("nan")))
                three_way.append(metrics["three_way_marginals"]["mean_l1"])
                lr.append(tstr_auc(evaluation, "logistic_regression"))
                nb.append(tstr_auc(evaluation, "naive_bayes"))
                rf.append(tstr_auc(evaluation, "random_forest"))
                average.append(result["average_tstr_roc_auc"])
                wall.append(run["seconds"]["wall"])
                if real is None and "real_train_paper_metrics" in evaluation:
                    real = evaluation["real_train_paper_metrics"]
            if not worst:
                continue
            common = max(set(worst_names), key=worst_names.count)
            print(f"| {NAMES.get(method, method)} | {epsilon} | {cell(worst, '{:.1f}')} "
                  f"({common}) | {cell(education, '{:.1f}%')} | {cell(three_way, '{:.3f}')} "
                  f"| {cell(lr, '{:.3f}')} | {cell(nb, '{:.3f}')} | {cell(rf, '{:.3f}')} "
                  f"| {cell(average, '{:.4f}')} "
                  f"| {cell(wall, '{:.0f}')} |")
    if real is not None:
        (gap, name), values = shape_gaps(real)
        print(f"| real train (non-private) | – | {gap:.1f} ({name}) "
              f"| {100 * values.get('education agrees with education-num', float('nan')):.1f}% "
              f"| {real['three_way_marginals']['mean_l1']:.3f} | | | | | |")


if __name__ == "__main__":
    main()
