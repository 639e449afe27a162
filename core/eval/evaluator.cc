#include "core/eval/evaluator.h"

#include <chrono>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/data/encoder.h"
#include "core/eval/classifier.h"
#include "core/eval/metrics.h"
#include "core/util/status_macros.h"

namespace dpcurator::eval {
namespace {

absl::StatusOr<std::unique_ptr<Classifier>> FitClassifier(ClassifierKind kind,
                                                          const Eigen::MatrixXd& x,
                                                          const Eigen::VectorXi& y,
                                                          int num_classes,
                                                          const EvalOptions& options) {
  switch (kind) {
    case ClassifierKind::kLogisticRegression: {
      DPC_ASSIGN_OR_RETURN(auto model,
                           LogisticRegression::Fit(x, y, num_classes, options.logistic_regression));
      return std::unique_ptr<Classifier>(std::move(model));
    }
    case ClassifierKind::kGradientBoostedTrees: {
      DPC_ASSIGN_OR_RETURN(auto model, GradientBoostedTrees::Fit(x, y, num_classes,
                                                                 options.gradient_boosted_trees));
      return std::unique_ptr<Classifier>(std::move(model));
    }
    case ClassifierKind::kNaiveBayes: {
      DPC_ASSIGN_OR_RETURN(auto model, NaiveBayes::Fit(x, y, num_classes, options.naive_bayes));
      return std::unique_ptr<Classifier>(std::move(model));
    }
    case ClassifierKind::kRandomForest: {
      DPC_ASSIGN_OR_RETURN(auto model,
                           RandomForest::Fit(x, y, num_classes, options.random_forest));
      return std::unique_ptr<Classifier>(std::move(model));
    }
  }
  return absl::InvalidArgumentError("Unknown classifier kind");
}

// Scores probabilities with the metrics of ClassifierResult.
absl::Status ScoreProbabilities(const Eigen::MatrixXd& proba, const Eigen::VectorXi& test_y,
                                ClassifierResult* result) {
  if (proba.cols() == 2) {
    const Eigen::VectorXd positive = proba.col(1);
    DPC_ASSIGN_OR_RETURN(result->roc_auc, RocAuc(positive, test_y, 1));
    DPC_ASSIGN_OR_RETURN(result->pr_auc, AveragePrecision(positive, test_y, 1));
  } else {
    DPC_ASSIGN_OR_RETURN(result->roc_auc, MacroRocAuc(proba, test_y));
    DPC_ASSIGN_OR_RETURN(result->pr_auc, MacroAveragePrecision(proba, test_y));
  }
  DPC_ASSIGN_OR_RETURN(result->accuracy, Accuracy(proba, test_y));
  DPC_ASSIGN_OR_RETURN(result->macro_f1, MacroF1(proba, test_y));
  return absl::OkStatus();
}

absl::Status CheckTestLabels(const Eigen::VectorXi& test_y, int num_classes,
                             const data::Schema& schema) {
  int present = 0;
  for (int k = 0; k < num_classes; ++k) present += (test_y.array() == k).any() ? 1 : 0;
  const std::string& label = schema.column(*schema.label_index()).name;
  if (num_classes == 2 && present < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "The real test table holds a single class of label '", label,
        "'; ROC-AUC and average precision need both classes"));
  }
  if (present < 2) {
    return absl::InvalidArgumentError(absl::StrCat("The real test table holds ", present,
                                                   " class(es) of label '", label,
                                                   "'; macro ROC-AUC needs at least two"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string ClassifierKindName(ClassifierKind kind) {
  switch (kind) {
    case ClassifierKind::kLogisticRegression:
      return "logistic_regression";
    case ClassifierKind::kGradientBoostedTrees:
      return "gradient_boosted_trees";
    case ClassifierKind::kNaiveBayes:
      return "naive_bayes";
    case ClassifierKind::kRandomForest:
      return "random_forest";
  }
  return "unknown";
}

absl::Status EvalOptions::Validate() const {
  DPC_RETURN_IF_ERROR(logistic_regression.Validate());
  DPC_RETURN_IF_ERROR(gradient_boosted_trees.Validate());
  DPC_RETURN_IF_ERROR(naive_bayes.Validate());
  DPC_RETURN_IF_ERROR(random_forest.Validate());
  DPC_RETURN_IF_ERROR(fidelity.Validate());
  DPC_RETURN_IF_ERROR(paper_metrics.Validate());
  if (compute_utility && classifiers.empty()) {
    return absl::InvalidArgumentError("Utility evaluation needs at least one classifier");
  }
  return absl::OkStatus();
}

absl::StatusOr<ClassifierResult> TrainAndScore(ClassifierKind kind,
                                               const Eigen::MatrixXd& train_x,
                                               const Eigen::VectorXi& train_y,
                                               const Eigen::MatrixXd& test_x,
                                               const Eigen::VectorXi& test_y, int num_classes,
                                               const EvalOptions& options) {
  ClassifierResult result;
  result.classifier = ClassifierKindName(kind);
  result.train_rows = train_x.rows();
  int only_class = -1;
  for (int k = 0; k < num_classes; ++k) {
    if ((train_y.array() == k).any()) {
      ++result.training_classes;
      only_class = k;
    }
  }
  Eigen::MatrixXd proba;
  if (result.training_classes == 1) {
    if (options.single_class_policy == EvalOptions::SingleClassPolicy::kFail) {
      return absl::FailedPreconditionError(absl::StrCat(
          "The training rows hold a single label class (level ", only_class,
          "); no classifier can be trained on them"));
    }
    result.single_class_training = true;
    proba = Eigen::MatrixXd::Zero(test_x.rows(), num_classes);
    proba.col(only_class).setOnes();
  } else {
    const auto start = std::chrono::steady_clock::now();
    DPC_ASSIGN_OR_RETURN(std::unique_ptr<Classifier> model,
                         FitClassifier(kind, train_x, train_y, num_classes, options));
    result.fit_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    DPC_ASSIGN_OR_RETURN(proba, model->PredictProba(test_x));
  }
  DPC_RETURN_IF_ERROR(ScoreProbabilities(proba, test_y, &result));
  return result;
}

absl::StatusOr<EvalReport> Evaluate(const data::Schema& schema, const data::Table& synthetic,
                                    const data::Table& real_test, const EvalOptions& options,
                                    const data::Table* real_train) {
  DPC_RETURN_IF_ERROR(options.Validate());
  DPC_RETURN_IF_ERROR(ValidateTableForSchema(schema, synthetic, "synthetic table"));
  DPC_RETURN_IF_ERROR(ValidateTableForSchema(schema, real_test, "real test table"));
  if (real_train != nullptr) {
    DPC_RETURN_IF_ERROR(ValidateTableForSchema(schema, *real_train, "real training table"));
  }
  EvalReport report;
  report.num_classes = schema.num_classes();
  report.synthetic_rows = synthetic.num_rows();
  report.real_test_rows = real_test.num_rows();
  report.real_train_rows = real_train != nullptr ? real_train->num_rows() : 0;
  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(schema);
  report.feature_dim = layout.total_dim();
  if (report.num_classes == 2) {
    report.positive_class = schema.LevelName(*schema.label_index(), 1);
  }

  if (options.compute_utility && !schema.label_index().has_value()) {
    report.warnings.push_back("The schema has no label column: utility was not evaluated");
  } else if (options.compute_utility) {
    const int num_classes = report.num_classes;
    const Eigen::MatrixXd test_x = data::EncodeFeatures(schema, layout, real_test);
    const Eigen::VectorXi test_y = data::ExtractLabels(schema, real_test);
    DPC_RETURN_IF_ERROR(CheckTestLabels(test_y, num_classes, schema));
    struct Source {
      const char* name;
      const data::Table* table;
    };
    std::vector<Source> sources = {{"synthetic", &synthetic}};
    if (real_train != nullptr) sources.push_back({"real", real_train});
    for (const Source& source : sources) {
      const Eigen::MatrixXd train_x = data::EncodeFeatures(schema, layout, *source.table);
      const Eigen::VectorXi train_y = data::ExtractLabels(schema, *source.table);
      for (ClassifierKind kind : options.classifiers) {
        auto result =
            TrainAndScore(kind, train_x, train_y, test_x, test_y, num_classes, options);
        if (!result.ok()) {
          return absl::Status(result.status().code(),
                              absl::StrCat("Training ", ClassifierKindName(kind), " on the ",
                                           source.name, " rows: ", result.status().message()));
        }
        result->train_source = source.name;
        if (result->single_class_training) {
          report.warnings.push_back(absl::StrCat(
              "The ", source.name, " rows hold a single class of label '",
              schema.column(*schema.label_index()).name, "': ", result->classifier,
              " was replaced by the constant predictor (ROC-AUC 0.5)"));
        }
        report.utility.push_back(*std::move(result));
      }
    }
  }

  if (options.compute_fidelity) {
    DPC_ASSIGN_OR_RETURN(report.fidelity,
                         ComputeFidelity(schema, synthetic, real_test, options.fidelity));
    if (real_train != nullptr) {
      DPC_ASSIGN_OR_RETURN(report.real_train_fidelity,
                           ComputeFidelity(schema, *real_train, real_test, options.fidelity));
    }
  }

  if (options.compute_paper_metrics && !schema.image_index().has_value()) {
    struct Candidate {
      const char* name;
      const data::Table* table;
      std::optional<PaperMetrics>* out;
    };
    std::vector<Candidate> candidates = {{"synthetic", &synthetic, &report.paper_metrics}};
    if (real_train != nullptr) {
      candidates.push_back({"real training", real_train, &report.real_train_paper_metrics});
    }
    for (const Candidate& candidate : candidates) {
      auto metrics =
          ComputePaperMetrics(schema, *candidate.table, real_test, options.paper_metrics);
      if (metrics.ok()) {
        *candidate.out = *std::move(metrics);
      } else {
        report.warnings.push_back(absl::StrCat("The paper metrics of the ", candidate.name,
                                               " rows were not computed: ",
                                               metrics.status().message()));
      }
    }
  }
  return report;
}

}  // namespace dpcurator::eval
