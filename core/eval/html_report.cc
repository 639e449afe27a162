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

// A label shown under the axis: at most kMaxAxisLabel characters (the
// tooltip keeps the whole text), cut on a UTF-8 character boundary.
constexpr size_t kMaxAxisLabel = 14;
std::string AxisLabel(const std::string& text) {
  if (text.size() <= kMaxAxisLabel) return text;
  size_t cut = kMaxAxisLabel - 1;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut) + "\u2026";
}

// A grouped bar chart of two normalised histograms. Many cells (a numeric
// column's bins, a long level list) share the width; labels are shown
// below for at most 24 cells and as tooltips (<title>) always. The labels
// run down-left at 45 degrees from their bar: the left margin and the room
// below the axis hold a whole kMaxAxisLabel-character label (issue 25: long
// labels were cut at the chart's edges).
std::string HistogramSvg(const ColumnShape& shape) {
  constexpr int kLeft = 70;
  constexpr int kWidth = 420;
  constexpr int kHeight = 200;
  constexpr int kPlotTop = 10;
  constexpr int kPlotBottom = 120;
  const int cells = static_cast<int>(shape.real.size());
  const double top = std::max({shape.real.maxCoeff(), shape.synthetic.maxCoeff(), 1e-12});
  const double cell_width = static_cast<double>(kWidth - kLeft - 10) / std::max(cells, 1);
  const double bar = cell_width * 0.4;
  std::string svg = absl::StrFormat(
      "<svg class=\"hist\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "viewBox=\"0 0 %d %d\" role=\"img\">",
      kWidth, kHeight, kWidth, kHeight);
  absl::StrAppend(&svg, absl::StrFormat("<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" "
                                        "stroke=\"#888\"/>",
                                        kLeft, kPlotBottom, kWidth - 10, kPlotBottom));
  for (int c = 0; c < cells; ++c) {
    const double x = kLeft + c * cell_width + cell_width * 0.1;
    const std::string full_label = c < static_cast<int>(shape.cell_labels.size())
                                       ? shape.cell_labels[c]
                                       : absl::StrCat(c);
    const std::string label = HtmlEscape(full_label);
    const double values[2] = {shape.real(c), shape.synthetic(c)};
    const char* colours[2] = {kRealColour, kSyntheticColour};
    const char* names[2] = {"real", "synthetic"};
    for (int k = 0; k < 2; ++k) {
      const double h = (kPlotBottom - kPlotTop) * values[k] / top;
      absl::StrAppend(&svg, absl::StrFormat(
                                "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                                "fill=\"%s\"><title>%s: %s %.4f</title></rect>",
                                x + k * bar, kPlotBottom - h, bar, h, colours[k], label,
                                names[k], values[k]));
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
// (white = identical trend, dark red = as different as it gets).
std::string HeatmapSvg(const data::Schema& schema, const QualityReport& quality) {
  std::vector<int> columns;
  for (const ColumnShape& shape : quality.shapes) columns.push_back(shape.column);
  const int n = static_cast<int>(columns.size());
  constexpr int kCell = 22;
  constexpr int kLabel = 130;
  const int size = kLabel + n * kCell + 10;
  std::string svg = absl::StrFormat(
      "<svg class=\"heatmap\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "viewBox=\"0 0 %d %d\" role=\"img\">",
      size, size, size, size);
  auto position = [&](int column) {
    return static_cast<int>(std::find(columns.begin(), columns.end(), column) - columns.begin());
  };
  for (int i = 0; i < n; ++i) {
    const std::string name = HtmlEscape(schema.column(columns[i]).name);
    absl::StrAppend(&svg, absl::StrFormat("<text x=\"%d\" y=\"%d\" font-size=\"10\" "
                                          "text-anchor=\"end\">%s</text>",
                                          kLabel - 4, kLabel + i * kCell + 15, name));
    const int x = kLabel + i * kCell + 15;
    absl::StrAppend(&svg, absl::StrFormat("<text x=\"%d\" y=\"%d\" font-size=\"10\" "
                                          "transform=\"rotate(-60 %d %d)\">%s</text>",
                                          x, kLabel - 4, x, kLabel - 4, name));
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
        HtmlEscape(schema.column(pair.column_b).name), pair.metric, pair.score,
        pair.real_association, pair.synthetic_association);
    for (const auto& [row, col] : {std::pair{i, j}, std::pair{j, i}}) {
      absl::StrAppend(&svg, absl::StrFormat(
                                "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
                                "fill=\"rgb(255,%d,%d)\" stroke=\"#ddd\"><title>%s</title></rect>",
                                kLabel + col * kCell, kLabel + row * kCell, kCell, kCell, green,
                                green, title));
    }
  }
  for (int i = 0; i < n; ++i) {
    absl::StrAppend(&svg, absl::StrFormat("<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
                                          "fill=\"#eee\"/>",
                                          kLabel + i * kCell, kLabel + i * kCell, kCell, kCell));
  }
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

std::string RenderHtmlReport(const data::Schema& schema, const HtmlReportInput& input) {
  const QualityReport& q = input.quality;
  std::string html = absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>",
      HtmlEscape(input.title), "</title>\n<style>\n",
      "body{font-family:sans-serif;margin:2em;max-width:1200px;color:#222}\n"
      "table{border-collapse:collapse;margin:0.5em 0}\n"
      "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}\n"
      ".score{font-size:1.6em;font-weight:bold}\n"
      ".cols{display:flex;flex-wrap:wrap;gap:1em}\n"
      ".col{border:1px solid #ddd;padding:0.5em}\n"
      ".legend span{display:inline-block;width:1em;height:1em;margin:0 0.3em}\n",
      "</style>\n</head>\n<body>\n<h1>", HtmlEscape(input.title), "</h1>\n");
  for (const std::string& note : input.notes) {
    absl::StrAppend(&html, "<p class=\"note\">", HtmlEscape(note), "</p>\n");
  }

  absl::StrAppend(&html, "<h2>Summary</h2>\n<table id=\"summary\">\n",
                  "<tr><th>property</th><th>score</th></tr>\n",
                  "<tr><td>Column Shapes</td><td class=\"score\" data-score=\"",
                  absl::StrFormat("%.6f", q.column_shapes), "\">", Percent(q.column_shapes),
                  "</td></tr>\n<tr><td>Column Pair Trends</td><td class=\"score\" data-score=\"",
                  absl::StrFormat("%.6f", q.column_pair_trends), "\">",
                  Percent(q.column_pair_trends),
                  "</td></tr>\n<tr><td>Overall</td><td class=\"score\" data-score=\"",
                  absl::StrFormat("%.6f", q.overall), "\">", Percent(q.overall),
                  "</td></tr>\n</table>\n");
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
      absl::StrAppend(&html, "<th>", HtmlEscape(c), " TSTR ROC-AUC</th>");
    }
    absl::StrAppend(&html, "</tr>\n");
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
      absl::StrAppend(&html, "</tr>\n");
    }
    absl::StrAppend(&html, "</table>\n<p>Every row is judged against the same real rows. The "
                           "sections below show the first, ",
                    HtmlEscape(input.compared.front().label), ".</p>\n");
  }

  const PrivacySpent& p = input.privacy;
  absl::StrAppend(&html, "<h2>Privacy spent</h2>\n<table id=\"privacy\">\n");
  if (p.epsilon > 0.0) {
    absl::StrAppend(&html, "<tr><th>method</th><td>", HtmlEscape(p.method), "</td></tr>\n",
                    "<tr><th>dataset</th><td>", HtmlEscape(p.dataset_id), "</td></tr>\n",
                    "<tr><th>&epsilon;</th><td>", absl::StrFormat("%.6g", p.epsilon),
                    "</td></tr>\n<tr><th>&delta;</th><td>", absl::StrFormat("%.3g", p.delta),
                    "</td></tr>\n<tr><th>neighbouring relation</th><td>",
                    p.relation.empty() ? "as recorded with the release"
                                       : HtmlEscape(p.relation),
                    "</td></tr>\n<tr><th>releases</th><td>",
                    HtmlEscape(absl::StrJoin(p.release_ids, ", ")), "</td></tr>\n");
  } else {
    absl::StrAppend(&html, "<tr><td>no model given: nothing was released (a comparison of two "
                           "tables the analyst holds)</td></tr>\n");
  }
  absl::StrAppend(&html, "</table>\n");

  if (!input.utility.empty()) {
    absl::StrAppend(&html, "<h2>Train on synthetic, test on real</h2>\n<table id=\"tstr\">\n",
                    "<tr><th>classifier</th><th>trained on</th><th>rows</th><th>ROC-AUC</th>"
                    "<th>PR-AUC</th><th>accuracy</th><th>macro F1</th></tr>\n");
    for (const ClassifierResult& r : input.utility) {
      absl::StrAppend(&html, "<tr><td>", HtmlEscape(r.classifier), "</td><td>",
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
                    shape.metric, " ", absl::StrFormat("%.3f", shape.score), "</p>",
                    HistogramSvg(shape), "</div>\n");
  }
  absl::StrAppend(&html, "</div>\n");

  absl::StrAppend(&html, "<h2>Column pair trends</h2>\n<p>Cell colour: 1 &minus; score (white: "
                         "the same trend; red: a loss of 0.25 or more). Hover a cell for the "
                         "metric and both associations (Pearson &rho; or Cram&eacute;r&rsquo;s V).",
                  q.pairs_skipped > 0
                      ? absl::StrCat(" ", q.pairs_skipped,
                                     " pair(s) left out: a numeric column is constant.")
                      : "",
                  "</p>\n", HeatmapSvg(schema, q), "\n</body>\n</html>\n");
  return html;
}

}  // namespace dpcurator::eval
