// The quality report (issue 17 item 4): SDMetrics-style scores against hand
// values, and the HTML page parsed back: balanced tags, one plot per
// column plus the heatmap, nothing external, data text escaped, and the
// summary it shows equal to the computed scores.
#include "core/eval/quality_report.h"

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/eval/html_report.h"

namespace dpcurator::eval {
namespace {

data::Schema MixedSchema(const std::string& first_name = "x") {
  data::Schema::Builder builder;
  builder.AddNumeric(first_name, 0.0, 10.0);
  builder.AddNumeric("y", 0.0, 10.0);
  builder.AddCategorical("colour", {"red", "green", "blue"});
  builder.AddCategorical("label", {"no", "yes"});
  builder.SetLabel("label");
  auto schema = builder.Build();
  EXPECT_TRUE(schema.ok()) << schema.status();
  return *schema;
}

data::Table RandomTable(int rows, uint64_t seed, double slope = 1.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 10.0);
  std::uniform_int_distribution<int> colour(0, 2);
  data::Table table;
  table.cells.resize(rows, 4);
  for (int r = 0; r < rows; ++r) {
    const double x = u(rng);
    table.cells(r, 0) = x;
    table.cells(r, 1) = std::clamp(slope > 0 ? x + 0.5 * (u(rng) - 5) / 5 : 10 - x, 0.0, 10.0);
    table.cells(r, 2) = colour(rng);
    table.cells(r, 3) = x > 5 ? 1 : 0;
  }
  return table;
}

TEST(KolmogorovSmirnovTest, HandValues) {
  EXPECT_NEAR(KolmogorovSmirnovStatistic({1, 2, 3}, {2, 3, 4}), 1.0 / 3, 1e-15);
  // Ties: the gap is read after every copy of a value in both samples.
  EXPECT_NEAR(KolmogorovSmirnovStatistic({0, 0, 1}, {0, 1, 1}), 1.0 / 3, 1e-15);
  EXPECT_NEAR(KolmogorovSmirnovStatistic({5, 5}, {5}), 0.0, 1e-15);
  EXPECT_NEAR(KolmogorovSmirnovStatistic({0, 1}, {2, 3}), 1.0, 1e-15);
  EXPECT_NEAR(KolmogorovSmirnovStatistic({0, 1, 2, 3}, {1.5}), 0.5, 1e-15);
}

TEST(CramersVTest, HandValues) {
  Eigen::MatrixXd diagonal(2, 2);
  diagonal << 0.5, 0.0, 0.0, 0.5;
  EXPECT_NEAR(CramersV(diagonal), 1.0, 1e-12);
  Eigen::MatrixXd independent(2, 3);
  independent << 0.1, 0.2, 0.2, 0.1, 0.2, 0.2;
  EXPECT_NEAR(CramersV(independent), 0.0, 1e-12);
  Eigen::MatrixXd one_row(1, 3);
  one_row << 0.2, 0.3, 0.5;
  EXPECT_EQ(CramersV(one_row), 0.0);
}

TEST(QualityReportTest, IdenticalTablesScoreOne) {
  const data::Schema schema = MixedSchema();
  const data::Table table = RandomTable(500, 1);
  auto report = ComputeQualityReport(schema, table, table);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_DOUBLE_EQ(report->column_shapes, 1.0);
  EXPECT_DOUBLE_EQ(report->column_pair_trends, 1.0);
  EXPECT_DOUBLE_EQ(report->overall, 1.0);
  EXPECT_EQ(report->shapes.size(), 4u);
  EXPECT_EQ(report->pairs.size(), 6u);
}

TEST(QualityReportTest, ScoresMatchHandComputedDistances) {
  const data::Schema schema = MixedSchema();
  data::Table real = RandomTable(400, 2);
  data::Table synthetic = real;
  // Colour: real uniform-ish; synthetic all "red". TVComplement = 1 - TV.
  Eigen::Vector3d real_colour = Eigen::Vector3d::Zero();
  for (int r = 0; r < 400; ++r) real_colour(static_cast<int>(real.cells(r, 2))) += 1.0 / 400;
  synthetic.cells.col(2).setZero();
  // x shifted by +2 (clamped): KSComplement from the exact statistic.
  for (int r = 0; r < 400; ++r) synthetic.cells(r, 0) = std::min(10.0, real.cells(r, 0) + 2.0);
  auto report = ComputeQualityReport(schema, real, synthetic);
  ASSERT_TRUE(report.ok()) << report.status();
  const double tv = 0.5 * (std::abs(real_colour(0) - 1.0) + real_colour(1) + real_colour(2));
  EXPECT_NEAR(report->shapes[2].score, 1.0 - tv, 1e-12);
  EXPECT_EQ(report->shapes[2].metric, "TVComplement");
  std::vector<double> a(real.cells.col(0).data(), real.cells.col(0).data() + 400);
  std::vector<double> b(synthetic.cells.col(0).data(), synthetic.cells.col(0).data() + 400);
  EXPECT_NEAR(report->shapes[0].score, 1.0 - KolmogorovSmirnovStatistic(a, b), 1e-12);
  EXPECT_LT(report->shapes[0].score, 0.85);  // a shift of 2 in 10 is visible
  EXPECT_EQ(report->shapes[0].metric, "KSComplement");
  // The unchanged columns keep a perfect shape score.
  EXPECT_DOUBLE_EQ(report->shapes[1].score, 1.0);
  EXPECT_DOUBLE_EQ(report->shapes[3].score, 1.0);
}

TEST(QualityReportTest, CorrelationSimilarityOfReversedTrendIsLow) {
  const data::Schema schema = MixedSchema();
  const data::Table real = RandomTable(1000, 3, /*slope=*/1.0);
  const data::Table synthetic = RandomTable(1000, 3, /*slope=*/-1.0);
  auto report = ComputeQualityReport(schema, real, synthetic);
  ASSERT_TRUE(report.ok()) << report.status();
  const PairTrend& xy = report->pairs[0];
  ASSERT_EQ(xy.metric, "CorrelationSimilarity");
  EXPECT_GT(xy.real_association, 0.9);
  EXPECT_NEAR(xy.synthetic_association, -1.0, 1e-12);
  EXPECT_NEAR(xy.score, 1.0 - std::abs(xy.real_association - xy.synthetic_association) / 2,
              1e-12);
  EXPECT_LT(xy.score, 0.1);
  // x with colour: a contingency pair.
  EXPECT_EQ(report->pairs[1].metric, "ContingencySimilarity");
}

TEST(QualityReportTest, ConstantNumericColumnSkipsItsCorrelationPairs) {
  const data::Schema schema = MixedSchema();
  const data::Table real = RandomTable(200, 4);
  data::Table synthetic = real;
  synthetic.cells.col(1).setConstant(3.0);
  auto report = ComputeQualityReport(schema, real, synthetic);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->pairs_skipped, 1);
  EXPECT_EQ(report->pairs.size(), 5u);
}

TEST(QualityReportTest, RejectsAnInvalidTable) {
  const data::Schema schema = MixedSchema();
  const data::Table real = RandomTable(50, 5);
  data::Table bad = real;
  bad.cells(3, 2) = 7;  // no such level
  EXPECT_FALSE(ComputeQualityReport(schema, real, bad).ok());
}

// Issue 25: an integer column's report histogram has integer edges (it
// binned 0..10 at 0.5, 1, 1.5, ... and 1..23 at 1.15, 2.3, ...), one bin per
// value when there are at most histogram_bins values, and long labels are
// shortened on the axis but kept whole in the tooltip.
TEST(QualityReportTest, IntegerColumnsHaveIntegerBinsAndLabelsFitTheChart) {
  data::Schema::Builder builder;
  builder.AddNumeric("children", 0, 10, /*integer=*/true);
  builder.AddNumeric("age", 17, 90, /*integer=*/true);
  builder.AddCategorical("occupation", {"Machine-op-inspct-and-more-words", "Sales"});
  auto schema = builder.Build();
  ASSERT_TRUE(schema.ok()) << schema.status();
  data::Table table;
  table.cells.resize(200, 3);
  for (int r = 0; r < 200; ++r) table.cells.row(r) << r % 11, 17 + r % 74, r % 2;
  auto quality = ComputeQualityReport(*schema, table, table);
  ASSERT_TRUE(quality.ok()) << quality.status();
  const ColumnShape& children = quality->shapes[0];
  ASSERT_EQ(children.real.size(), 11);  // 0..10, one bin each
  EXPECT_EQ(children.cell_labels.front(), "0");
  EXPECT_EQ(children.cell_labels.back(), "10");
  EXPECT_NEAR(children.real(3), 18.0 / 200.0, 1e-12);  // 3, 14, 25, ... : 18 rows
  const ColumnShape& age = quality->shapes[1];
  ASSERT_EQ(age.real.size(), 19);  // 74 values in runs of ceil(74 / 20) = 4
  EXPECT_EQ(age.cell_labels[0], "17-20");
  EXPECT_EQ(age.cell_labels[18], "89-90");  // the last run stops at the bound
  EXPECT_NEAR(age.real.sum(), 1.0, 1e-12);
  for (const std::string& label : age.cell_labels) {
    EXPECT_EQ(label.find('.'), std::string::npos) << label;
  }
  HtmlReportInput input;
  input.quality = *quality;
  const std::string html = RenderHtmlReport(*schema, input);
  EXPECT_NE(html.find("<title>Machine-op-inspct-and-more-words</title>Machine-op-in\u2026</text>"),
            std::string::npos);
}

// A small HTML reader for the test: checks that every non-void element is
// closed in order, and collects the tags seen and attribute text.
struct ParsedHtml {
  bool balanced = true;
  std::string error;
  std::map<std::string, int> tag_counts;
  std::vector<std::string> attributes;  // raw attribute text of every tag
};

ParsedHtml ParseHtml(const std::string& html) {
  static const std::set<std::string> kVoid = {"meta", "br", "hr", "img", "link", "input",
                                              "line", "rect", "path", "circle"};
  ParsedHtml parsed;
  std::vector<std::string> stack;
  size_t i = 0;
  while ((i = html.find('<', i)) != std::string::npos) {
    const size_t end = html.find('>', i);
    if (end == std::string::npos) {
      parsed.balanced = false;
      parsed.error = "unterminated tag";
      return parsed;
    }
    std::string tag = html.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag.empty() || tag[0] == '!') continue;  // doctype
    const bool closing = tag[0] == '/';
    const bool self_closing = tag.back() == '/';
    if (closing) tag = tag.substr(1);
    if (self_closing) tag.pop_back();
    const size_t space = tag.find_first_of(" \n");
    const std::string name = tag.substr(0, space);
    if (space != std::string::npos) parsed.attributes.push_back(tag.substr(space));
    if (closing) {
      if (stack.empty() || stack.back() != name) {
        parsed.balanced = false;
        parsed.error = "unexpected </" + name + ">";
        return parsed;
      }
      stack.pop_back();
      continue;
    }
    ++parsed.tag_counts[name];
    // <rect ...><title>..</title></rect> and <circle ...><title>..</title>
    // </circle> close explicitly; bare rects and lines are self-closed
    // with "/>".
    if (self_closing || (kVoid.count(name) > 0 && name != "rect" && name != "circle")) continue;
    stack.push_back(name);
  }
  if (!stack.empty()) {
    parsed.balanced = false;
    parsed.error = "unclosed <" + stack.back() + ">";
  }
  return parsed;
}

// Issue 38: a nullable numeric column's missing values are a "missing" bar
// of its histogram, part of its KS score (missing sorts above every value)
// and a cell of its contingency tables; Pearson is not used with it.
TEST(QualityReportTest, NullableNumericHasAMissingBar) {
  data::Schema::Builder builder;
  builder.AddNumeric("x", 0.0, 10.0, /*integer=*/false, /*nullable=*/true);
  builder.AddNumeric("y", 0.0, 10.0);
  builder.AddCategorical("label", {"no", "yes"});
  builder.SetLabel("label");
  const data::Schema schema = builder.Build().value();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto table = [&](int missing_per_ten) {
    data::Table t;
    t.cells.resize(100, 3);
    for (int r = 0; r < 100; ++r) {
      t.cells(r, 0) = r % 10 < missing_per_ten ? nan : (r % 10) + 0.5;
      t.cells(r, 1) = (r % 10) + 0.5;
      t.cells(r, 2) = r % 2;
    }
    return t;
  };
  const data::Table real = table(3);       // 30% missing
  const data::Table synthetic = table(1);  // 10% missing
  const auto report = ComputeQualityReport(schema, real, synthetic, QualityOptions{});
  ASSERT_TRUE(report.ok()) << report.status();
  const ColumnShape& x = report->shapes[0];
  ASSERT_EQ(x.cell_labels.size(), x.real.size());
  ASSERT_EQ(x.synthetic.size(), x.real.size());
  EXPECT_EQ(x.cell_labels.back(), "missing");
  EXPECT_DOUBLE_EQ(x.real(x.real.size() - 1), 0.3);
  EXPECT_DOUBLE_EQ(x.synthetic(x.synthetic.size() - 1), 0.1);
  // The synthetic rows hold 1.5 and 2.5 where the real ones are missing:
  // the CDFs differ by 0.2 from 2.5 up to the "missing" point.
  EXPECT_NEAR(x.score, 0.8, 1e-12);
  EXPECT_NE(report->shapes[1].cell_labels.back(), "missing");  // y is not nullable
  for (const PairTrend& pair : report->pairs) {
    EXPECT_TRUE(std::isfinite(pair.score));
    if (pair.column_a == 0 || pair.column_b == 0) {
      EXPECT_EQ(pair.metric, "ContingencySimilarity");
    }
  }
  EXPECT_TRUE(std::isfinite(report->overall));
}

TEST(HtmlReportTest, SelfContainedBalancedAndEscaped) {
  const data::Schema schema = MixedSchema("<b>x & \"y\"</b>");
  const data::Table real = RandomTable(300, 6);
  const data::Table synthetic = RandomTable(300, 7, -1.0);
  auto quality = ComputeQualityReport(schema, real, synthetic);
  ASSERT_TRUE(quality.ok()) << quality.status();
  HtmlReportInput input;
  input.quality = *quality;
  input.privacy.method = "merf";
  input.privacy.epsilon = 1.0;
  input.privacy.delta = 1e-5;
  input.privacy.relation = "ADD_REMOVE";
  input.privacy.release_ids = {"rel_1"};
  ClassifierResult row;
  row.classifier = "logistic_regression";
  row.train_source = "synthetic";
  row.roc_auc = 0.875;
  input.utility.push_back(row);
  const std::string html = RenderHtmlReport(schema, input);

  const ParsedHtml parsed = ParseHtml(html);
  ASSERT_TRUE(parsed.balanced) << parsed.error;
  // One histogram per column and the heatmap.
  EXPECT_EQ(parsed.tag_counts.at("svg"), 5);
  EXPECT_EQ(parsed.tag_counts.count("script"), 0u);
  for (const std::string& attributes : parsed.attributes) {
    EXPECT_EQ(attributes.find("src="), std::string::npos) << attributes;
    EXPECT_EQ(attributes.find("href="), std::string::npos) << attributes;
    // The only URL is the SVG namespace name, which is never fetched.
    const size_t url = attributes.find("http");
    if (url != std::string::npos) {
      EXPECT_EQ(attributes.compare(url, 26, "http://www.w3.org/2000/svg"), 0) << attributes;
    }
  }
  EXPECT_EQ(html.find("<b>x"), std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;x &amp; &quot;y&quot;&lt;/b&gt;"), std::string::npos);
  // The summary shows the computed scores.
  const std::string needle = "data-score=\"";
  std::vector<double> shown;
  for (size_t at = html.find(needle); at != std::string::npos; at = html.find(needle, at + 1)) {
    shown.push_back(std::stod(html.substr(at + needle.size(), 12)));
  }
  ASSERT_EQ(shown.size(), 3u);
  EXPECT_NEAR(shown[0], quality->column_shapes, 1e-6);
  EXPECT_NEAR(shown[1], quality->column_pair_trends, 1e-6);
  EXPECT_NEAR(shown[2], quality->overall, 1e-6);
  EXPECT_NE(html.find("ADD_REMOVE"), std::string::npos);
  EXPECT_NE(html.find("0.875"), std::string::npos);
}

}  // namespace
}  // namespace dpcurator::eval

namespace dpcurator::eval {
namespace {

// The binary section (DP-auto-GAN's two plots) appears only when given, with
// one point per column in each plot.
TEST(HtmlReportTest, BinarySectionShowsBothPlotsWhenGiven) {
  const data::Schema schema = MixedSchema("b");
  const data::Table real = RandomTable(300, 6);
  auto quality = ComputeQualityReport(schema, real, real);
  ASSERT_TRUE(quality.ok()) << quality.status();
  HtmlReportInput input;
  input.quality = *quality;
  const std::string without = RenderHtmlReport(schema, input);
  EXPECT_EQ(without.find("Binary columns"), std::string::npos);

  DiagonalScatter probability;
  probability.points = {{"a", 0.1, 0.12}, {"b", 0.3, 0.2}, {"c<", 0.5, 0.5}};
  DimensionWiseAuroc auroc;
  auroc.scatter.points = {{"a", 0.7, 0.6}, {"b", 0.8, 0.79}};
  auroc.eligible_targets = 2;
  input.binary_probability = probability;
  input.binary_auroc = auroc;
  const std::string html = RenderHtmlReport(schema, input);
  const ParsedHtml parsed = ParseHtml(html);
  ASSERT_TRUE(parsed.balanced) << parsed.error;
  EXPECT_NE(html.find("<h2>Binary columns</h2>"), std::string::npos);
  EXPECT_EQ(parsed.tag_counts.at("svg"), ParseHtml(without).tag_counts.at("svg") + 2);
  EXPECT_EQ(parsed.tag_counts.at("circle"), 5);
  EXPECT_NE(html.find("c&lt;: 0.5, 0.5"), std::string::npos);
}

}  // namespace
}  // namespace dpcurator::eval

namespace dpcurator::eval {
namespace {

// Issue 38: a TSTR ROC-AUC at chance, or far below train-on-real, is
// flagged beside the "Overall" score (before: "Overall 83%" beside an AUC
// of 0.47 and no word); a fair one is not.
TEST(HtmlReportTest, TstrAtChanceOrFarBelowRealIsFlaggedBesideOverall) {
  const auto row = [](const std::string& classifier, const std::string& source, double auc) {
    ClassifierResult r;
    r.classifier = classifier;
    r.train_source = source;
    r.roc_auc = auc;
    return r;
  };
  EXPECT_TRUE(UtilityFlags({row("logistic_regression", "synthetic", 0.56),
                            row("logistic_regression", "real", 0.70)})
                  .empty());
  const std::vector<std::string> chance =
      UtilityFlags({row("logistic_regression", "synthetic", 0.47)});
  ASSERT_EQ(chance.size(), 1u);
  EXPECT_NE(chance[0].find("logistic regression trained on the synthetic rows scores ROC-AUC "
                           "0.470"),
            std::string::npos)
      << chance[0];
  EXPECT_NE(chance[0].find("chance"), std::string::npos);
  const std::vector<std::string> far =
      UtilityFlags({row("gradient_boosted_trees", "synthetic", 0.66),
                    row("gradient_boosted_trees", "real", 0.82)});
  ASSERT_EQ(far.size(), 1u);
  EXPECT_NE(far[0].find("0.160 below the same classifier trained on real rows (0.820)"),
            std::string::npos)
      << far[0];

  const data::Schema schema = MixedSchema();
  const data::Table real = RandomTable(300, 6);
  auto quality = ComputeQualityReport(schema, real, real);
  ASSERT_TRUE(quality.ok()) << quality.status();
  HtmlReportInput input;
  input.quality = *quality;
  input.utility = {row("logistic_regression", "synthetic", 0.88)};
  EXPECT_EQ(RenderHtmlReport(schema, input).find("class=\"flag\""), std::string::npos);
  input.utility = {row("logistic_regression", "synthetic", 0.47)};
  const std::string html = RenderHtmlReport(schema, input);
  const size_t overall = html.find("<td>Overall</td>");
  ASSERT_NE(overall, std::string::npos);
  const size_t row_end = html.find("</tr>", overall);
  EXPECT_NE(html.substr(overall, row_end - overall).find("class=\"flag\""), std::string::npos)
      << html.substr(overall, row_end - overall);
  EXPECT_NE(html.find("at or below chance (0.5)"), std::string::npos);
  // Human names, not the metric and classifier ids.
  EXPECT_EQ(html.find("TVComplement"), std::string::npos);
  EXPECT_EQ(html.find("KSComplement"), std::string::npos);
  EXPECT_EQ(html.find("<td>logistic_regression</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>logistic regression</td>"), std::string::npos);
}

// Issue 38: the privacy section lists each compared file's release (before:
// the first model's epsilon for every file) and the dataset's composed
// total, or says that it is unknown offline.
TEST(HtmlReportTest, PrivacyListsEachFilesReleaseAndTheDatasetTotal) {
  const data::Schema schema = MixedSchema();
  const data::Table real = RandomTable(300, 6);
  auto quality = ComputeQualityReport(schema, real, real);
  ASSERT_TRUE(quality.ok()) << quality.status();
  HtmlReportInput input;
  input.quality = *quality;
  PrivacySpent aim{"AIM", "aim.csv", "aim", "ds_1", {"rel_aim"}, 0.75, 1e-6, ""};
  PrivacySpent mst{"MST", "mst.csv", "mst", "ds_1", {"rel_mst"}, 0.25, 1e-6, ""};
  PrivacySpent merf{"DP-MERF", "merf.csv", "", "", {}, 0.0, 0.0, ""};
  input.releases = {aim, mst, merf};
  input.dataset_total.unknown_reason = "made offline";
  std::string html = RenderHtmlReport(schema, input);
  ASSERT_TRUE(ParseHtml(html).balanced) << ParseHtml(html).error;
  const size_t privacy = html.find("<table id=\"privacy\">");
  ASSERT_NE(privacy, std::string::npos);
  const std::string section = html.substr(privacy, html.find("</table>", privacy) - privacy);
  for (const char* needle :
       {"AIM (aim.csv)</td><td>aim</td><td>ds_1</td><td>0.75</td>",
        "MST (mst.csv)</td><td>mst</td><td>ds_1</td><td>0.25</td>", "rel_aim", "rel_mst",
        "DP-MERF (merf.csv)</td><td colspan=\"6\">no model given for this file"}) {
    EXPECT_NE(section.find(needle), std::string::npos) << needle << "\n" << section;
  }
  EXPECT_NE(html.find("composed total: unknown (made offline)"), std::string::npos);
  input.dataset_total = {true, 1.5, 4.0, 1e-5, ""};
  html = RenderHtmlReport(schema, input);
  EXPECT_NE(html.find("&epsilon; = 1.5 of its cap 4 (&delta; = 1e-05)"), std::string::npos);
}

// Issue 38's chart frictions: a 40-level column shows its top levels and
// "other"; numeric bin labels are rounded (no "1.23457e+08", no 17 digits);
// the y axis is in percent; a legend names both colours in every chart; a
// multiclass label's AUC is called macro one-vs-rest.
TEST(HtmlReportTest, ChartsAreReadableForWideColumnsAndLargeNumbers) {
  EXPECT_EQ(FormatAxisNumber(0.125), "0.125");
  EXPECT_EQ(FormatAxisNumber(2.5), "2.5");
  EXPECT_EQ(FormatAxisNumber(12345), "12,300");
  EXPECT_EQ(FormatAxisNumber(100000), "100,000");
  EXPECT_EQ(FormatAxisNumber(123456789.123), "123M");
  EXPECT_EQ(FormatAxisNumber(1250000), "1.25M");
  EXPECT_EQ(FormatAxisNumber(999999999), "1B");
  EXPECT_EQ(FormatAxisNumber(-3e9), "-3B");

  data::Schema::Builder builder;
  builder.AddNumeric("income", 0.0, 1e9);
  std::vector<std::string> countries;
  for (int i = 0; i < 40; ++i) countries.push_back("country-" + std::to_string(i));
  builder.AddCategorical("country", countries);
  builder.AddCategorical("label", {"a", "b", "c"});
  builder.SetLabel("label");
  auto schema = builder.Build();
  ASSERT_TRUE(schema.ok()) << schema.status();
  data::Table table;
  table.cells.resize(400, 3);
  for (int r = 0; r < 400; ++r) {
    table.cells.row(r) << 3.3e8 * (r % 3) + 12345.678, (r * r) % 40, r % 3;
  }
  auto quality = ComputeQualityReport(*schema, table, table);
  ASSERT_TRUE(quality.ok()) << quality.status();
  for (const std::string& label : quality->shapes[0].cell_labels) {
    EXPECT_LE(label.size(), 8u) << label;
    EXPECT_EQ(label.find('e'), std::string::npos) << label;
  }
  HtmlReportInput input;
  input.quality = *quality;
  ClassifierResult r;
  r.classifier = "logistic_regression";
  r.train_source = "synthetic";
  r.roc_auc = 0.8;
  input.utility = {r};
  const std::string html = RenderHtmlReport(*schema, input);
  ASSERT_TRUE(ParseHtml(html).balanced) << ParseHtml(html).error;
  EXPECT_NE(html.find("other (29 levels)"), std::string::npos);
  // 12 bars of each colour in the country chart, not 40.
  const size_t country = html.find("<h3>country</h3>");
  ASSERT_NE(country, std::string::npos);
  const std::string chart = html.substr(country, html.find("</svg>", country) - country);
  size_t bars = 0;
  for (size_t at = chart.find(": real "); at != std::string::npos;
       at = chart.find(": real ", at + 1)) {
    ++bars;
  }
  EXPECT_EQ(bars, 12u);
  EXPECT_NE(chart.find("% of rows"), std::string::npos);
  EXPECT_NE(chart.find(">synthetic</text>"), std::string::npos);
  EXPECT_NE(chart.find(">real</text>"), std::string::npos);
  EXPECT_NE(html.find("ROC-AUC (macro one-vs-rest)"), std::string::npos);
  EXPECT_EQ(html.find("max-width:1200px"), std::string::npos);
}

}  // namespace
}  // namespace dpcurator::eval
