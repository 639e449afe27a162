// Fit time of the evaluation classifiers on Adult-sized random data:
// 30000 training rows x 110 features (10 numeric in [0, 1] + 100 binary, the
// shape of Adult's encoded features), a non-linear label, 10000 test rows.
//
//   eval_bench [rows]     (default 30000)

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

#include "Eigen/Core"
#include "core/eval/gradient_boosted_trees.h"
#include "core/eval/logistic_regression.h"
#include "core/eval/metrics.h"
#include "core/eval/naive_bayes.h"
#include "core/eval/random_forest.h"
#include "core/util/public_rng.h"

namespace {

using dpcurator::PublicRng;
namespace eval = dpcurator::eval;

constexpr int kNumeric = 10;
constexpr int kBinary = 100;
constexpr int kTestRows = 10000;

void MakeData(int n, uint64_t seed, Eigen::MatrixXd* x, Eigen::VectorXi* y) {
  PublicRng rng(seed);
  x->resize(n, kNumeric + kBinary);
  y->resize(n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < kNumeric; ++j) (*x)(i, j) = rng.Uniform();
    // Binary columns: 20 blocks of 5 one-hot levels.
    for (int b = 0; b < kBinary / 5; ++b) {
      const int level = static_cast<int>(rng.UniformInt(5));
      for (int l = 0; l < 5; ++l) (*x)(i, kNumeric + 5 * b + l) = l == level ? 1.0 : 0.0;
    }
    const double logit = -0.5 + 2.0 * (*x)(i, 0) - 1.5 * (*x)(i, 1) +
                         3.0 * ((*x)(i, 2) - 0.5) * ((*x)(i, 3) - 0.5) * 4 +
                         1.0 * (*x)(i, kNumeric) - 0.8 * (*x)(i, kNumeric + 6) +
                         1.2 * (*x)(i, kNumeric) * (*x)(i, kNumeric + 11);
    (*y)(i) = rng.Uniform() < 1.0 / (1.0 + std::exp(-logit)) ? 1 : 0;
  }
}

struct Row {
  std::string name;
  double fit_seconds;
  double predict_seconds;
  double auc;
  std::string note;
};

double Seconds(const std::function<void()>& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 30000;
  Eigen::MatrixXd x_train, x_test;
  Eigen::VectorXi y_train, y_test;
  MakeData(n, 1, &x_train, &y_train);
  MakeData(kTestRows, 2, &x_test, &y_test);
  std::vector<Row> rows;

  auto run = [&](const std::string& name, auto fit, const std::string& note) {
    std::unique_ptr<eval::Classifier> model;
    const double fit_seconds = Seconds([&] {
      auto fitted = fit();
      if (!fitted.ok()) {
        std::fprintf(stderr, "%s: %s\n", name.c_str(), fitted.status().ToString().c_str());
        std::exit(1);
      }
      model = *std::move(fitted);
    });
    Eigen::MatrixXd proba;
    const double predict_seconds = Seconds([&] { proba = *model->PredictProba(x_test); });
    const double auc = *eval::RocAuc(proba.col(1), y_test);
    rows.push_back({name, fit_seconds, predict_seconds, auc, note});
  };

  run("logistic_regression",
      [&] { return eval::LogisticRegression::Fit(x_train, y_train, 2); }, "Newton/IRLS");
  eval::LogisticRegressionOptions multinomial;
  run("logistic_regression (3-class path)",
      [&] { return eval::LogisticRegression::Fit(x_train, y_train, 3, multinomial); },
      "L-BFGS softmax");
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  for (int threads : {1, static_cast<int>(cores)}) {
    eval::GradientBoostedTreesOptions options;
    options.num_threads = threads;
    run("gradient_boosted_trees",
        [&] { return eval::GradientBoostedTrees::Fit(x_train, y_train, 2, options); },
        "200 rounds, depth 5, 64 bins, " + std::to_string(threads) + " thread(s)");
  }

  run("naive_bayes", [&] { return eval::NaiveBayes::Fit(x_train, y_train, 2); },
      "Gaussian, var_smoothing 1e-9");
  for (int threads : {1, static_cast<int>(cores)}) {
    eval::RandomForestOptions options;
    options.num_threads = threads;
    run("random_forest",
        [&] { return eval::RandomForest::Fit(x_train, y_train, 2, options); },
        "50 trees, depth 10, 32 bins, sqrt(p) features, " + std::to_string(threads) +
            " thread(s)");
  }

  std::printf("eval_bench: %d train x %d features, %d test rows, %u hardware threads\n\n", n,
              kNumeric + kBinary, kTestRows, cores);
  std::printf("%-36s %10s %12s %8s  %s\n", "classifier", "fit (s)", "predict (s)", "AUC",
              "notes");
  for (const Row& r : rows) {
    std::printf("%-36s %10.3f %12.3f %8.4f  %s\n", r.name.c_str(), r.fit_seconds,
                r.predict_seconds, r.auc, r.note.c_str());
  }
  return 0;
}
