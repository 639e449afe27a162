#ifndef DPCURATOR_CORE_EVAL_HTML_REPORT_H_
#define DPCURATOR_CORE_EVAL_HTML_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include <optional>

#include "core/data/schema.h"
#include "core/eval/binary_metrics.h"
#include "core/eval/evaluator.h"
#include "core/eval/quality_report.h"

namespace dpcurator::eval {

// What the synthetic rows cost, as the model and its releases record it.
struct PrivacySpent {
  // The synthetic file these rows are (its --labels name and path); empty
  // for a single-file report made before per-file rows existed.
  std::string label;
  std::string file;
  std::string method;      // "merf", "pearl", ... ("" when unknown)
  std::string dataset_id;
  std::vector<std::string> release_ids;
  double epsilon = 0.0;    // 0 when unknown (real-vs-real reports)
  double delta = 0.0;
  std::string relation;    // "ADD_REMOVE", "REPLACE_ONE" or "" when unknown
};

// One synthetic table among several judged against the same real rows
// (issue 26 item 4: AIM beside the other methods on one page).
struct ComparedTable {
  std::string label;  // the method or file it came from
  std::string file;
  int64_t rows = 0;
  double column_shapes = 0.0;
  double column_pair_trends = 0.0;
  double overall = 0.0;
  // Train-on-synthetic, test-on-real rows; may be empty (--no-tstr).
  std::vector<ClassifierResult> utility;
};

// The dataset's composed total as the server's ledger has it (every
// release and session of the dataset, not only the files on the page), or
// why it is not known (a report made offline).
struct DatasetTotal {
  bool known = false;
  double epsilon_spent = 0.0;
  double epsilon_cap = 0.0;
  double delta = 0.0;
  std::string unknown_reason;  // shown when !known
};

// Train-on-synthetic rows that an "Overall" score must not hide (issue 38:
// "Overall 83%" beside a TSTR ROC-AUC below chance, with no flag): a
// classifier trained on the synthetic rows at or below chance on the real
// rows (ROC-AUC <= 0.5 + kChanceRocAucMargin; 0.5 is chance for the binary
// AUC and for the macro one-vs-rest mean alike), or at least
// kFarBelowRealRocAuc below the same classifier trained on real rows.
// One sentence per flagged classifier, in `utility` order.
inline constexpr double kChanceRocAucMargin = 0.05;
inline constexpr double kFarBelowRealRocAuc = 0.15;
std::vector<std::string> UtilityFlags(const std::vector<ClassifierResult>& utility);

// Words a reader knows for the metric and classifier ids
// ("TVComplement" -> "category shares: 1 - total variation distance").
std::string HumanMetricName(absl::string_view metric);
std::string HumanClassifierName(absl::string_view classifier);

struct HtmlReportInput {
  std::string title = "dpcurator quality report";
  // Free text shown under the title (file names, row counts, date).
  std::vector<std::string> notes;
  PrivacySpent privacy;
  // One per compared file, in --synthetic order (file and label set; the
  // rest empty where no model was given for it). Empty: `privacy` alone.
  std::vector<PrivacySpent> releases;
  DatasetTotal dataset_total;
  QualityReport quality;
  // Train-on-synthetic, test-on-real rows (EvalReport::utility); may be empty.
  std::vector<ClassifierResult> utility;
  // Binary columns (categorical with two levels): DP-auto-GAN's plots
  // (core/eval/binary_metrics.h), shown when set.
  std::optional<DiagonalScatter> binary_probability;
  std::optional<DimensionWiseAuroc> binary_auroc;
  // Two or more: a "Compared" table, one row per table, under the summary;
  // the other sections show the first table (`quality`, `utility` are its).
  std::vector<ComparedTable> compared;
};

// One self-contained HTML5 page: inline CSS and inline SVG plots, no
// scripts, no external resources, so it opens offline and can be mailed.
// Sections: summary scores, privacy spent, TSTR table, per-column
// histograms (real vs synthetic), and the pair-trend heatmap. Every text
// from the data (column names, levels, ids) is HTML-escaped.
std::string RenderHtmlReport(const data::Schema& schema, const HtmlReportInput& input);

// &, <, >, " and ' as character references.
std::string HtmlEscape(absl::string_view text);

}  // namespace dpcurator::eval

#endif  // DPCURATOR_CORE_EVAL_HTML_REPORT_H_
