#include "core/eval/html_report.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace dpcurator::eval {
namespace {

constexpr const char* kRealColour = "#3b6ea8";
constexpr const char* kSyntheticColour = "#e07b39";

std::string Percent(double score) { return absl::StrFormat("%.1f%%", 100.0 * score); }

// Bars a categorical chart shows: the most frequent levels (by the larger of
// the two shares) and one "other" bar for the rest, so a 124-level column
// has readable labels (issue 38).
constexpr int kMaxCategoryBars = 12;

struct ChartCells {
  std::vector<std::string> labels;
  std::vector<double> real;
  std::vector<double> synthetic;
};

ChartCells CellsOf(const ColumnShape& shape) {
  ChartCells out;
  const int cells = static_cast<int>(shape.real.size());
  const auto label = [&](int c) {
    return c < static_cast<int>(shape.cell_labels.size()) ? shape.cell_labels[c]
                                                           : absl::StrCat(c);
  };
  if (!shape.categorical || cells <= kMaxCategoryBars) {
    for (int c = 0; c < cells; ++c) {
      out.labels.push_back(label(c));
      out.real.push_back(shape.real(c));
      out.synthetic.push_back(shape.synthetic(c));
    }
    return out;
  }
  std::vector<int> order(cells);
  for (int c = 0; c < cells; ++c) order[c] = c;
  // Ties by level order, so the page is the same on every run.
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return std::max(shape.real(a), shape.synthetic(a)) >
           std::max(shape.real(b), shape.synthetic(b));
  });
  const int shown = kMaxCategoryBars - 1;
  for (int k = 0; k < shown; ++k) {
    out.labels.push_back(label(order[k]));
    out.real.push_back(shape.real(order[k]));
    out.synthetic.push_back(shape.synthetic(order[k]));
  }
  double real_rest = 0.0;
  double synthetic_rest = 0.0;
  for (int k = shown; k < cells; ++k) {
    real_rest += shape.real(order[k]);
    synthetic_rest += shape.synthetic(order[k]);
  }
  out.labels.push_back(absl::StrCat("other (", cells - shown, " levels)"));
  out.real.push_back(real_rest);
  out.synthetic.push_back(synthetic_rest);
  return out;
}

// A label shown under the axis: at most kMaxAxisLabel characters (the
// tooltip keeps the whole text), cut on a UTF-8 character boundary.
constexpr size_t kMaxAxisLabel = 14;
std::string AxisLabel(const std::string& text) {
  if (text.size() <= kMaxAxisLabel) return text;
  size_t cut = kMaxAxisLabel - 1;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut) + "\u2026";
}

// A grouped bar chart of two normalised histograms (CellsOf: a long level
// list as its top levels and "other"). Labels are shown below for at most
// 24 cells and as tooltips (<title>) always; they run down-left at 45
// degrees from their bar, and the room below the axis holds a whole
// kMaxAxisLabel-character label (issue 25). The y axis is the share of rows
// in percent, and a legend in the chart says which colour is which (issue
// 38). The SVG scales to its box's width (viewBox), so the page's width is
// used.
std::string HistogramSvg(const ColumnShape& shape) {
  constexpr int kLeft = 70;
  constexpr int kWidth = 420;
  constexpr int kHeight = 200;
  constexpr int kPlotTop = 22;
  constexpr int kPlotBottom = 120;
  const ChartCells chart = CellsOf(shape);
  const int cells = static_cast<int>(chart.real.size());
  double top = 1e-12;
  for (int c = 0; c < cells; ++c) top = std::max({top, chart.real[c], chart.synthetic[c]});
  const double cell_width = static_cast<double>(kWidth - kLeft - 10) / std::max(cells, 1);
  const double bar = cell_width * 0.4;
  std::string svg = absl::StrFormat(
      "<svg class=\"hist\" xmlns=\"http://www.w3.org/2000/svg\" width=\"100%%\" "
      "viewBox=\"0 0 %d %d\" preserveAspectRatio=\"xMinYMin meet\" role=\"img\">",
      kWidth, kHeight);
  // The legend, top right.
  absl::StrAppend(
      &svg,
      absl::StrFormat("<rect x=\"%d\" y=\"4\" width=\"9\" height=\"9\" fill=\"%s\"/>"
                      "<text x=\"%d\" y=\"12\" font-size=\"9\">real</text>"
                      "<rect x=\"%d\" y=\"4\" width=\"9\" height=\"9\" fill=\"%s\"/>"
                      "<text x=\"%d\" y=\"12\" font-size=\"9\">synthetic</text>",
                      kWidth - 120, kRealColour, kWidth - 108, kWidth - 75, kSyntheticColour,
                      kWidth - 63));
  // The y axis: 0, half and the top of the scale, as a share of rows.
  absl::StrAppend(&svg, absl::StrFormat("<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" "
                                        "stroke=\"#888\"/>",
                                        kLeft - 4, kPlotTop, kLeft - 4, kPlotBottom));
  for (const double fraction : {0.0, 0.5, 1.0}) {
    const double y = kPlotBottom - (kPlotBottom - kPlotTop) * fraction;
    const double share = 100.0 * top * fraction;
    absl::StrAppend(&svg, absl::StrFormat(
                              "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
                              "stroke=\"#888\"/><text x=\"%d\" y=\"%.1f\" font-size=\"8\" "
                              "text-anchor=\"end\">%s%%</text>",
                              kLeft - 7, y, kLeft - 4, y, kLeft - 9, y + 3,
                              share >= 10 ? absl::StrFormat("%.0f", share)
                                          : absl::StrFormat("%.1f", share)));
  }
  absl::StrAppend(&svg, absl::StrFormat("<text x=\"12\" y=\"%d\" font-size=\"8\" "
                                        "transform=\"rotate(-90 12 %d)\" "
                                        "text-anchor=\"middle\">%% of rows</text>",
                                        (kPlotTop + kPlotBottom) / 2,
                                        (kPlotTop + kPlotBottom) / 2));
  absl::StrAppend(&svg, absl::StrFormat("<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" "
                                        "stroke=\"#888\"/>",
                                        kLeft, kPlotBottom, kWidth - 10, kPlotBottom));
  for (int c = 0; c < cells; ++c) {
    const double x = kLeft + c * cell_width + cell_width * 0.1;
    const std::string& full_label = chart.labels[c];
    const std::string label = HtmlEscape(full_label);
    const double values[2] = {chart.real[c], chart.synthetic[c]};
    const char* colours[2] = {kRealColour, kSyntheticColour};
    const char* names[2] = {"real", "synthetic"};
    for (int k = 0; k < 2; ++k) {
      const double h = (kPlotBottom - kPlotTop) * values[k] / top;
      absl::StrAppend(&svg, absl::StrFormat(
                                "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                                "fill=\"%s\"><title>%s: %s %.1f%%</title></rect>",
                                x + k * bar, kPlotBottom - h, bar, h, colours[k], label,
                                names[k], 100.0 * values[k]));
    }
    if (cells <= 24) {
      const double cx = x + bar;
      absl::StrAppend(&svg, absl::StrFormat(
                                "<text x=\"%.1f\" y=\"%d\" font-size=\"8\" text-anchor=\"end\" "
                                "transform=\"rotate(-45 %.1f %d)\"><title>%s</title>%s</text>",
                                cx, kPlotBottom + 10, cx, kPlotBottom + 10, label,
                                HtmlEscape(AxisLabel(full_label))));
    }
  }
  absl::StrAppend(&svg, "</svg>");
  return svg;
}

// Heatmap of the pair-trend scores: cell (i, j) is coloured by 1 - score
// (white = identical trend, dark red = as different as it gets). The room
// for the names above and left of the grid follows the longest (shown) name,
// so none is clipped (issue 38), and a colour scale says what red means.
std::string HeatmapSvg(const data::Schema& schema, const QualityReport& quality) {
  std::vector<int> columns;
  for (const ColumnShape& shape : quality.shapes) columns.push_back(shape.column);
  const int n = static_cast<int>(columns.size());
  constexpr int kCell = 22;
  constexpr size_t kMaxName = 24;  // characters shown; the tooltip has the whole name
  const auto shown_name = [&](int column) {
    const std::string& name = schema.column(column).name;
    if (name.size() <= kMaxName) return name;
    size_t cut = kMaxName - 1;
    while (cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80) --cut;
    return name.substr(0, cut) + "\u2026";
  };
  size_t longest = 4;
  for (int column : columns) longest = std::max(longest, shown_name(column).size());
  // About 6 px a character at font-size 10; the names above run at -60
  // degrees, so they need sin(60) of that height.
  const int label = static_cast<int>(6 * longest) + 12;
  constexpr int kScale = 40;  // the colour scale below the grid
  const int width = label + n * kCell + 10;
  const int height = label + n * kCell + kScale;
  std::string svg = absl::StrFormat(
      "<svg class=\"heatmap\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
      "height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\">",
      std::max(width, 260), height, std::max(width, 260), height);
  auto position = [&](int column) {
    return static_cast<int>(std::find(columns.begin(), columns.end(), column) - columns.begin());
  };
  for (int i = 0; i < n; ++i) {
    const std::string full = HtmlEscape(schema.column(columns[i]).name);
    const std::string name = HtmlEscape(shown_name(columns[i]));
    absl::StrAppend(&svg, absl::StrFormat("<text x=\"%d\" y=\"%d\" font-size=\"10\" "
                                          "text-anchor=\"end\"><title>%s</title>%s</text>",
                                          label - 4, label + i * kCell + 15, full, name));
    const int x = label + i * kCell + 15;
    absl::StrAppend(&svg, absl::StrFormat("<text x=\"%d\" y=\"%d\" font-size=\"10\" "
                                          "transform=\"rotate(-60 %d %d)\"><title>%s</title>"
                                          "%s</text>",
                                          x, label - 4, x, label - 4, full, name));
  }
  for (const PairTrend& pair : quality.pairs) {
    const int i = position(pair.column_a);
    const int j = position(pair.column_b);
    const double badness = std::clamp(1.0 - pair.score, 0.0, 1.0);
    // Scale so a 0.25 loss of score is already fully saturated: real
    // differences in pair trends are small numbers.
    const double t = std::min(1.0, badness * 4.0);
    const int green = static_cast<int>(std::lround(255 * (1.0 - t)));
    const std::string title = absl::StrFormat(
        "%s / %s: %s %.3f (real %.3f, synthetic %.3f)",
        HtmlEscape(schema.column(pair.column_a).name),
        HtmlEscape(schema.column(pair.column_b).name), HumanMetricName(pair.metric), pair.score,
        pair.real_association, pair.synthetic_association);
    for (const auto& [row, col] : {std::pair{i, j}, std::pair{j, i}}) {
      absl::StrAppend(&svg, absl::StrFormat(
                                "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
                                "fill=\"rgb(255,%d,%d)\" stroke=\"#ddd\"><title>%s</title></rect>",
                                label + col * kCell, label + row * kCell, kCell, kCell, green,
                                green, title));
    }
  }
  for (int i = 0; i < n; ++i) {
    absl::StrAppend(&svg, absl::StrFormat("<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
                                          "fill=\"#eee\"/>",
                                          label + i * kCell, label + i * kCell, kCell, kCell));
  }
  // The colour scale: five steps from the same trend to a loss of 0.25.
  const int scale_y = label + n * kCell + 10;
  for (int k = 0; k < 5; ++k) {
    const int green = static_cast<int>(std::lround(255 * (1.0 - k / 4.0)));
    absl::StrAppend(&svg, absl::StrFormat("<rect x=\"%d\" y=\"%d\" width=\"20\" "
                                          "height=\"10\" fill=\"rgb(255,%d,%d)\" "
                                          "stroke=\"#ddd\"/>",
                                          10 + 20 * k, scale_y, green, green));
  }
  absl::StrAppend(&svg, absl::StrFormat("<text x=\"10\" y=\"%d\" font-size=\"9\">same trend"
                                        "</text><text x=\"110\" y=\"%d\" font-size=\"9\" "
                                        "text-anchor=\"end\">score 0.75 or less</text>",
                                        scale_y + 22, scale_y + 22));
  absl::StrAppend(&svg, "</svg>");
  return svg;
}

}  // namespace

std::string HtmlEscape(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string HumanMetricName(absl::string_view metric) {
  if (metric == "KSComplement") return "distribution match (1 \u2212 Kolmogorov\u2013Smirnov distance)";
  if (metric == "TVComplement") return "category shares match (1 \u2212 total variation distance)";
  if (metric == "CorrelationSimilarity") return "correlation match (1 \u2212 |\u0394 Pearson \u03c1|/2)";
  if (metric == "ContingencySimilarity") {
    return "joint frequencies match (1 \u2212 total variation of the contingency table)";
  }
  return std::string(metric);
}

std::string HumanClassifierName(absl::string_view classifier) {
  if (classifier == "gradient_boosted_trees") return "gradient-boosted trees";
  // Ids are snake_case: "logistic_regression" reads as "logistic regression".
  std::string name(classifier);
  std::replace(name.begin(), name.end(), '_', ' ');
  return name;
}

std::vector<std::string> UtilityFlags(const std::vector<ClassifierResult>& utility) {
  std::vector<std::string> flags;
  for (const ClassifierResult& r : utility) {
    if (r.train_source != "synthetic") continue;
    const std::string who = absl::StrCat(HumanClassifierName(r.classifier),
                                         " trained on the synthetic rows scores ROC-AUC ",
                                         absl::StrFormat("%.3f", r.roc_auc), " on the real rows");
    if (r.roc_auc <= 0.5 + kChanceRocAucMargin) {
      flags.push_back(absl::StrCat(who, r.roc_auc <= 0.5 ? ", at or below" : ", near",
                                   " chance (0.5): these rows do not carry the label, "
                                   "whatever the shape scores say"));
      continue;
    }
    for (const ClassifierResult& real : utility) {
      if (real.train_source == "real" && real.classifier == r.classifier &&
          real.roc_auc - r.roc_auc >= kFarBelowRealRocAuc) {
        flags.push_back(absl::StrCat(
            who, absl::StrFormat(", %.3f below the same classifier trained on real rows "
                                 "(%.3f)",
                                 real.roc_auc - r.roc_auc, real.roc_auc)));
      }
    }
  }
  return flags;
}

std::string RenderHtmlReport(const data::Schema& schema, const HtmlReportInput& input) {
  const QualityReport& q = input.quality;
  std::string html = absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>",
      HtmlEscape(input.title), "</title>\n<style>\n",
      "body{font-family:sans-serif;margin:2em;color:#222}\n"
      "table{border-collapse:collapse;margin:0.5em 0}\n"
      "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}\n"
      ".score{font-size:1.6em;font-weight:bold}\n"
      ".cols{display:flex;flex-wrap:wrap;gap:1em}\n"
      ".col{border:1px solid #ddd;padding:0.5em;flex:1 1 380px;max-width:640px}\n"
      ".wide{overflow-x:auto}\n"
      ".flag{color:#a40000;font-weight:bold}\n"
      ".legend span{display:inline-block;width:1em;height:1em;margin:0 0.3em}\n",
      "</style>\n</head>\n<body>\n<h1>", HtmlEscape(input.title), "</h1>\n");
  for (const std::string& note : input.notes) {
    absl::StrAppend(&html, "<p class=\"note\">", HtmlEscape(note), "</p>\n");
  }

  // The classifiers' verdict beside the shape scores: an "Overall" that
  // reads well must not hide rows that cannot predict the label (issue 38).
  const std::vector<std::string> flags = UtilityFlags(input.utility);
  const std::string overall_flag =
      flags.empty() ? ""
                    : absl::StrCat("<td class=\"flag\">but ", flags.size(),
                                   " TSTR flag(s): see below</td>");
  absl::StrAppend(&html, "<h2>Summary</h2>\n<table id=\"summary\">\n",
                  "<tr><th>property</th><th>score</th></tr>\n",
                  "<tr><td>Column Shapes</td><td class=\"score\" data-score=\"",
                  absl::StrFormat("%.6f", q.column_shapes), "\">", Percent(q.column_shapes),
                  "</td></tr>\n<tr><td>Column Pair Trends</td><td class=\"score\" data-score=\"",
                  absl::StrFormat("%.6f", q.column_pair_trends), "\">",
                  Percent(q.column_pair_trends),
                  "</td></tr>\n<tr><td>Overall</td><td class=\"score\" data-score=\"",
                  absl::StrFormat("%.6f", q.overall), "\">", Percent(q.overall), "</td>",
                  overall_flag, "</tr>\n</table>\n");
  if (!flags.empty()) {
    absl::StrAppend(&html, "<ul id=\"flags\">\n");
    for (const std::string& flag : flags) {
      absl::StrAppend(&html, "<li class=\"flag\">", HtmlEscape(flag), "</li>\n");
    }
    absl::StrAppend(&html, "</ul>\n");
  }
  absl::StrAppend(&html,
                  "<p>Column Shapes: 1 &minus; Kolmogorov&ndash;Smirnov statistic (numeric) or 1 "
                  "&minus; total variation distance (categorical), averaged over columns. Column "
                  "Pair Trends: 1 &minus; |&rho;<sub>real</sub> &minus; &rho;<sub>synthetic</sub>|/2 "
                  "for numeric pairs, 1 &minus; total variation distance of the contingency tables "
                  "otherwise (numerics in ",
                  q.contingency_bins,
                  " bins), averaged over pairs (SDMetrics&rsquo; Quality Report).</p>\n");

  if (input.compared.size() >= 2) {
    // The classifiers of the first table's synthetic-trained rows, as columns.
    std::vector<std::string> classifiers;
    for (const ClassifierResult& r : input.compared.front().utility) {
      if (r.train_source == "synthetic") classifiers.push_back(r.classifier);
    }
    absl::StrAppend(&html, "<h2>Compared</h2>\n<table id=\"compared\">\n<tr><th>synthetic "
                           "rows</th><th>file</th><th>rows</th><th>Column Shapes</th><th>Column "
                           "Pair Trends</th><th>Overall</th>");
    for (const std::string& c : classifiers) {
      absl::StrAppend(&html, "<th>", HtmlEscape(HumanClassifierName(c)), " TSTR ROC-AUC</th>");
    }
    absl::StrAppend(&html, "<th>flags</th></tr>\n");
    // The first table's train-on-real rows are every table's reference.
    std::vector<ClassifierResult> real_rows;
    for (const ClassifierResult& r : input.utility) {
      if (r.train_source == "real") real_rows.push_back(r);
    }
    for (const ComparedTable& t : input.compared) {
      absl::StrAppend(&html, "<tr><td>", HtmlEscape(t.label), "</td><td>", HtmlEscape(t.file),
                      "</td><td>", t.rows, "</td><td data-score=\"",
                      absl::StrFormat("%.6f", t.column_shapes), "\">", Percent(t.column_shapes),
                      "</td><td>", Percent(t.column_pair_trends), "</td><td>",
                      Percent(t.overall), "</td>");
      for (const std::string& c : classifiers) {
        std::string cell = "&ndash;";
        for (const ClassifierResult& r : t.utility) {
          if (r.train_source == "synthetic" && r.classifier == c) {
            cell = absl::StrFormat("%.3f", r.roc_auc);
          }
        }
        absl::StrAppend(&html, "<td>", cell, "</td>");
      }
      std::vector<ClassifierResult> judged = t.utility;
      judged.insert(judged.end(), real_rows.begin(), real_rows.end());
      const std::vector<std::string> table_flags = UtilityFlags(judged);
      absl::StrAppend(&html, "<td class=\"flag\">",
                      HtmlEscape(absl::StrJoin(table_flags, "; ")), "</td></tr>\n");
    }
    absl::StrAppend(&html, "</table>\n<p>Every row is judged against the same real rows. The "
                           "sections below show the first, ",
                    HtmlEscape(input.compared.front().label), ".</p>\n");
  }

  // One row per compared file: each file's own release, never one
  // release's epsilon for several files (issue 38), then the dataset's
  // composed total, which the per-release rows do not add up to.
  std::vector<PrivacySpent> rows = input.releases;
  if (rows.empty() && input.privacy.epsilon > 0.0) rows.push_back(input.privacy);
  bool any_release = false;
  for (const PrivacySpent& r : rows) any_release = any_release || r.epsilon > 0.0;
  absl::StrAppend(&html, "<h2>Privacy spent</h2>\n<table id=\"privacy\">\n");
  if (any_release) {
    absl::StrAppend(&html, "<tr><th>synthetic rows</th><th>method</th><th>dataset</th>"
                           "<th>&epsilon;</th><th>&delta;</th><th>neighbouring relation</th>"
                           "<th>releases</th></tr>\n");
    for (const PrivacySpent& r : rows) {
      const std::string name =
          r.label.empty() ? std::string("the synthetic rows")
                          : absl::StrCat(r.label, r.file.empty() ? "" : " (" + r.file + ")");
      if (r.epsilon <= 0.0) {
        absl::StrAppend(&html, "<tr><td>", HtmlEscape(name),
                        "</td><td colspan=\"6\">no model given for this file: its cost is "
                        "not known to this report</td></tr>\n");
        continue;
      }
      absl::StrAppend(&html, "<tr><td>", HtmlEscape(name), "</td><td>", HtmlEscape(r.method),
                      "</td><td>", HtmlEscape(r.dataset_id), "</td><td>",
                      absl::StrFormat("%.6g", r.epsilon), "</td><td>",
                      absl::StrFormat("%.3g", r.delta), "</td><td>",
                      r.relation.empty() ? "as recorded with the release"
                                         : HtmlEscape(r.relation),
                      "</td><td>", HtmlEscape(absl::StrJoin(r.release_ids, ", ")),
                      "</td></tr>\n");
    }
  } else {
    absl::StrAppend(&html, "<tr><td>no model given: nothing was released (a comparison of two "
                           "tables the analyst holds)</td></tr>\n");
  }
  absl::StrAppend(&html, "</table>\n");
  if (any_release) {
    const DatasetTotal& total = input.dataset_total;
    if (total.known) {
      absl::StrAppend(
          &html, "<p id=\"dataset-total\">The dataset&rsquo;s composed total, by the "
                 "server&rsquo;s ledger (every release and session of the dataset, these "
                 "included): &epsilon; = ",
          absl::StrFormat("%.6g", total.epsilon_spent), " of its cap ",
          absl::StrFormat("%.6g", total.epsilon_cap), " (&delta; = ",
          absl::StrFormat("%.3g", total.delta), ").</p>\n");
    } else {
      absl::StrAppend(
          &html, "<p id=\"dataset-total\">The dataset&rsquo;s composed total: unknown (",
          HtmlEscape(total.unknown_reason.empty() ? "not asked" : total.unknown_reason),
          "). Each &epsilon; above is one release&rsquo;s; releases of one dataset compose, "
          "and the ledger&rsquo;s total (<code>dpcurator budget --dataset ID</code>) is the "
          "guarantee the dataset&rsquo;s people have.</p>\n");
    }
  }

  if (!input.utility.empty()) {
    // A label of more than two classes is scored by the macro mean of its
    // one-vs-rest AUCs (ClassifierResult), and the header says so.
    const bool multiclass = schema.label_index().has_value() &&
                            schema.NumLevels(*schema.label_index()) > 2;
    const char* averaging = multiclass ? " (macro one-vs-rest)" : "";
    absl::StrAppend(&html, "<h2>Train on synthetic, test on real</h2>\n<table id=\"tstr\">\n",
                    "<tr><th>classifier</th><th>trained on</th><th>rows</th><th>ROC-AUC",
                    averaging, "</th><th>PR-AUC", averaging,
                    "</th><th>accuracy</th><th>macro F1</th></tr>\n");
    for (const ClassifierResult& r : input.utility) {
      absl::StrAppend(&html, "<tr><td>", HtmlEscape(HumanClassifierName(r.classifier)), "</td><td>",
                      HtmlEscape(r.train_source), "</td><td>", r.train_rows, "</td>",
                      absl::StrFormat("<td>%.3f</td><td>%.3f</td><td>%.3f</td><td>%.3f</td>",
                                      r.roc_auc, r.pr_auc, r.accuracy, r.macro_f1),
                      "</tr>\n");
    }
    absl::StrAppend(&html, "</table>\n");
  }

  if (input.binary_probability.has_value() || input.binary_auroc.has_value()) {
    // Both plots put real on x and synthetic on y: a good generator keeps its
    // points on the dashed diagonal (papers/dp-auto-gan.md §3.2).
    absl::StrAppend(&html, "<h2>Binary columns</h2>\n<div class=\"cols\">\n");
    if (input.binary_probability.has_value()) {
      const DiagonalScatter& p = *input.binary_probability;
      absl::StrAppend(
          &html, "<div class=\"col\"><h3>Dimension-wise probability</h3><p>",
          absl::StrFormat("%zu columns; mean |gap| %.4f, worst %.4f (%s); correlation %.3f",
                          p.points.size(), p.mean_abs_gap, p.max_abs_gap,
                          HtmlEscape(p.worst_column), p.correlation),
          "</p>", DiagonalScatterSvg(p, "share of ones", "real", "synthetic", 0.0, 1.0),
          "</div>\n");
    }
    if (input.binary_auroc.has_value()) {
      const DimensionWiseAuroc& a = *input.binary_auroc;
      absl::StrAppend(
          &html, "<div class=\"col\"><h3>Dimension-wise prediction</h3><p>",
          absl::StrFormat("ROC-AUC of logistic regression from the other binary columns, "
                          "trained on real (x) or synthetic (y) rows, tested on real rows; "
                          "%zu of %d columns; mean |gap| %.4f; %zu constant in the synthetic "
                          "rows (left out)",
                          a.scatter.points.size(), a.eligible_targets, a.scatter.mean_abs_gap,
                          a.constant_in_synthetic.size()),
          "</p>", DiagonalScatterSvg(a.scatter, "ROC-AUC", "trained on real", "trained on synthetic",
                                     0.4, 1.0),
          "</div>\n");
    }
    absl::StrAppend(&html, "</div>\n");
  }

  absl::StrAppend(&html, "<h2>Column shapes</h2>\n<p class=\"legend\"><span style=\"background:",
                  kRealColour, "\"></span>real<span style=\"background:", kSyntheticColour,
                  "\"></span>synthetic</p>\n<div class=\"cols\">\n");
  for (const ColumnShape& shape : q.shapes) {
    absl::StrAppend(&html, "<div class=\"col\"><h3>", HtmlEscape(shape.name), "</h3><p>",
                    HumanMetricName(shape.metric), ": ", absl::StrFormat("%.3f", shape.score),
                    "</p>", HistogramSvg(shape), "</div>\n");
  }
  absl::StrAppend(&html, "</div>\n");

  absl::StrAppend(&html, "<h2>Column pair trends</h2>\n<p>Cell colour: 1 &minus; score (white: "
                         "the same trend; red: a loss of 0.25 or more). Hover a cell for the "
                         "metric and both associations (Pearson &rho; or Cram&eacute;r&rsquo;s V).",
                  q.pairs_skipped > 0
                      ? absl::StrCat(" ", q.pairs_skipped,
                                     " pair(s) left out: a numeric column is constant.")
                      : "",
                  "</p>\n<div class=\"wide\">", HeatmapSvg(schema, q),
                  "</div>\n</body>\n</html>\n");
  return html;
}

}  // namespace dpcurator::eval
