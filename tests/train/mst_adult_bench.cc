// MST on Adult, core only (issue 17 item 6): the 1-way release, the private
// tree selection, the 2-way release, the fit and the sample, at (epsilon,
// delta) = (1, 1e-5) under ADD_REMOVE, then issue 17's four shape checks
// and the logistic-regression TSTR ROC-AUC on adult.test. Prints numbers;
// not a ctest (it reads ../shared/data and takes a few seconds).
//
//   build/tests/train/mst_adult_bench [seed] [epsilon]

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "core/data/csv.h"
#include "core/data/discretize.h"
#include "core/data/encoder.h"
#include "core/eval/evaluator.h"
#include "core/privacy/noise_source.h"
#include "core/release/marginals.h"
#include "core/train/mst.h"
#include "proto/convert.h"

#ifndef DPC_SOURCE_DIR
#error "DPC_SOURCE_DIR must be defined by the build"
#endif

namespace dpcurator {
namespace {

struct Shapes {
  double hours_40 = 0, gain_0 = 0, education_agrees = 0, husband_female = 0;
};

Shapes ShapeChecks(const data::Schema& schema, const data::Table& table,
                   const std::map<int, double>& education_num_of) {
  const int hours = *schema.FindColumn("hours-per-week");
  const int gain = *schema.FindColumn("capital-gain");
  const int education = *schema.FindColumn("education");
  const int education_num = *schema.FindColumn("education-num");
  const int relationship = *schema.FindColumn("relationship");
  const int sex = *schema.FindColumn("sex");
  const int husband = 2;  // "Husband" in the schema's category list
  const int female = 0;
  Shapes s;
  const double n = static_cast<double>(table.num_rows());
  for (Eigen::Index r = 0; r < table.num_rows(); ++r) {
    s.hours_40 += std::round(table.cells(r, hours)) == 40;
    s.gain_0 += std::round(table.cells(r, gain)) == 0;
    s.education_agrees += std::round(table.cells(r, education_num)) ==
                          education_num_of.at(static_cast<int>(table.cells(r, education)));
    s.husband_female += table.cells(r, relationship) == husband && table.cells(r, sex) == female;
  }
  s.hours_40 *= 100 / n;
  s.gain_0 *= 100 / n;
  s.education_agrees *= 100 / n;
  s.husband_female *= 100 / n;
  return s;
}

int Main(int argc, char** argv) {
  const uint64_t seed = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1;
  const double epsilon = argc > 2 ? std::atof(argv[2]) : 1.0;
  const double delta = 1e-5;
  auto proto = ReadSchemaFile(DPC_SOURCE_DIR "/schemas/adult.schema.json");
  if (!proto.ok()) return std::fprintf(stderr, "%s\n", proto.status().ToString().c_str()), 1;
  const data::Schema schema = SchemaFromProto(*proto).value();
  data::CsvOptions csv;
  auto train = data::ReadCsvFile(schema, DPC_SOURCE_DIR "/../shared/data/adult/adult.data", csv);
  auto test = data::ReadCsvFile(schema, DPC_SOURCE_DIR "/../shared/data/adult/adult.test", csv);
  if (!train.ok() || !test.ok()) {
    std::fprintf(stderr, "reading Adult: %s %s\n", train.status().ToString().c_str(),
                 test.status().ToString().c_str());
    return 1;
  }
  const int n = schema.num_columns();
  const data::Discretizer domain = data::Discretizer::Create(schema).value();
  const train::MstBudget budget = train::CalibrateMstBudget(n, epsilon, delta).value();
  std::printf("MST on Adult: %lld rows, %d columns, epsilon %g, delta %g: rho %.5f, s %.3f, "
              "selection eps %.4f per step\n",
              static_cast<long long>(train->num_rows()), n, epsilon, delta, budget.rho,
              budget.one_way_noise_multiplier, budget.selection_epsilon);
  privacy::SeededNoiseSource noise(seed);
  const auto relation = privacy::NeighbouringRelation::kAddRemove;
  release::MarginalsKind::Params one_way_params;
  for (int c = 0; c < n; ++c) one_way_params.cliques.push_back({c});
  one_way_params = release::MarginalsKind::Resolve(one_way_params, schema).value();
  auto one_way = release::MarginalsKind::Run(one_way_params, schema, *train, relation,
                                             budget.one_way_noise_multiplier, &noise)
                     .value();
  const auto edges = train::SelectMstTree(domain.Encode(*train), one_way.marginals, relation,
                                          budget.selection_epsilon, &noise)
                         .value();
  release::MarginalsKind::Params two_way_params;
  std::printf("tree:");
  for (const auto& [i, j] : edges) {
    two_way_params.cliques.push_back({i, j});
    std::printf(" %s-%s", schema.column(i).name.c_str(), schema.column(j).name.c_str());
  }
  std::printf("\n");
  two_way_params = release::MarginalsKind::Resolve(two_way_params, schema).value();
  auto two_way = release::MarginalsKind::Run(two_way_params, schema, *train, relation,
                                             budget.two_way_noise_multiplier, &noise)
                     .value();
  std::vector<int> sizes;
  for (int c = 0; c < n; ++c) sizes.push_back(domain.domain_size(c));
  const train::TreeModel model =
      train::FitTreeModel(sizes, one_way.marginals, two_way.marginals).value();
  const data::Table synthetic =
      domain.Decode(train::SampleTreeModel(model, train->num_rows(), seed + 1), seed + 2);

  // Education's number, as the real rows pair them (public codebook fact).
  std::map<int, double> education_num_of;
  const int education = *schema.FindColumn("education");
  const int education_num = *schema.FindColumn("education-num");
  for (Eigen::Index r = 0; r < train->num_rows(); ++r) {
    education_num_of[static_cast<int>(train->cells(r, education))] =
        train->cells(r, education_num);
  }
  const Shapes real = ShapeChecks(schema, *train, education_num_of);
  const Shapes synth = ShapeChecks(schema, synthetic, education_num_of);
  std::printf("%-40s %8s %8s\n", "check", "real", "MST");
  std::printf("%-40s %7.1f%% %7.1f%%\n", "hours-per-week = 40", real.hours_40, synth.hours_40);
  std::printf("%-40s %7.1f%% %7.1f%%\n", "capital-gain = 0", real.gain_0, synth.gain_0);
  std::printf("%-40s %7.1f%% %7.1f%%\n", "education agrees with education-num",
              real.education_agrees, synth.education_agrees);
  std::printf("%-40s %7.2f%% %7.2f%%\n", "relationship = Husband and sex = Female",
              real.husband_female, synth.husband_female);

  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(schema);
  eval::EvalOptions options;
  auto score = [&](const data::Table& rows) {
    return eval::TrainAndScore(eval::ClassifierKind::kLogisticRegression,
                               data::EncodeFeatures(schema, layout, rows),
                               data::ExtractLabels(schema, rows),
                               data::EncodeFeatures(schema, layout, *test),
                               data::ExtractLabels(schema, *test), 2, options)
        .value();
  };
  std::printf("LR TSTR ROC-AUC: synthetic %.4f, real %.4f\n", score(synthetic).roc_auc,
              score(*train).roc_auc);
  return 0;
}

}  // namespace
}  // namespace dpcurator

int main(int argc, char** argv) { return dpcurator::Main(argc, argv); }
