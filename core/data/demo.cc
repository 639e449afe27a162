#include "core/data/demo.h"

#include <algorithm>
#include <cmath>

#include "core/util/public_rng.h"

namespace dpcurator::data {
namespace {

enum DemoColumn { kRegion, kAge, kEducation, kIncome, kPlan, kTenure, kUsage, kChurn, kColumns };

int Categorical(PublicRng* rng, std::initializer_list<double> probabilities) {
  double u = rng->Uniform();
  int index = 0;
  for (double p : probabilities) {
    if (u < p) return index;
    u -= p;
    ++index;
  }
  return index - 1;
}

// Beta(2, 3) as the second order statistic of 4 uniforms.
double Beta23(PublicRng* rng) {
  double u[4];
  for (double& v : u) v = rng->Uniform();
  std::sort(u, u + 4);
  return u[1];
}

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

}  // namespace

Schema DemoSchema() {
  Schema::Builder builder;
  builder.AddCategorical("region", {"north", "south", "east", "west"})
      .AddNumeric("age", 18, 80, /*integer=*/true)
      .AddCategorical("education", {"primary", "secondary", "bachelor", "master", "doctorate"})
      .AddNumeric("income", 5, 250)
      .AddCategorical("plan", {"basic", "plus", "premium"})
      .AddNumeric("tenure", 0, 40)
      .AddNumeric("usage", 0, 60)
      .AddCategorical("churn", {"no", "yes"})
      .SetLabel("churn");
  return *builder.Build();  // A fixed, valid schema.
}

Table GenerateDemoTable(int64_t num_rows, uint64_t seed) {
  PublicRng rng(seed);
  Table table;
  table.cells.resize(num_rows, kColumns);
  for (int64_t i = 0; i < num_rows; ++i) {
    const int region = Categorical(&rng, {0.30, 0.30, 0.25, 0.15});
    const double age = std::round(18.0 + 62.0 * Beta23(&rng));
    const int education = age < 45 ? Categorical(&rng, {0.10, 0.40, 0.30, 0.15, 0.05})
                                    : Categorical(&rng, {0.25, 0.45, 0.20, 0.08, 0.02});
    const double income = std::clamp(
        std::exp(3.4 + 0.25 * education + 0.012 * (age - 18) + 0.35 * rng.Normal()), 5.0, 250.0);
    int plan = income < 40 ? 0 : (income < 90 ? 1 : 2);
    if (rng.Uniform() < 0.15) plan = static_cast<int>(rng.UniformInt(3));
    const double tenure = std::clamp(std::min(age - 18.0, -6.0 * std::log1p(-rng.Uniform())),
                                     0.0, 40.0);
    const double usage = std::clamp(
        20.0 + 8.0 * (plan == 2) - 0.15 * (age - 40) + 6.0 * rng.Normal(), 0.0, 60.0);
    const double score = -1.2 + 1.6 * (tenure < 2) - 0.9 * (plan == 2) +
                         1.4 * std::sin((age - 18) / 9.0) * (region >= 2) +
                         0.08 * (usage - 20) * (usage - 20) / 10.0 - 0.5 * (education >= 3) +
                         0.6 * (income < 30) * (plan != 0);
    const int churn = rng.Uniform() < Sigmoid(score) ? 1 : 0;
    table.cells.row(i) << region, age, education, income, plan, tenure, usage, churn;
  }
  return table;
}

}  // namespace dpcurator::data
