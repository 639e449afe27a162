// `dpcurator schema draft` and `schema check`: a first schema from the
// curator's own CSV or ARFF file, on the curator's own machine, with every
// bound and category list read from the rows marked "data_derived" (see
// client/schema_file.h and docs/schema.md). `schema fit`: bins from a small
// DP release instead (docs/privacy.md 2.11.1).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/cli.h"
#include "client/commands.h"
#include "client/connection.h"
#include "client/proto_file.h"
#include "client/schema_file.h"
#include "client/text_upload.h"
#include "core/data/arff.h"
#include "core/data/csv.h"
#include "core/data/draft.h"
#include "core/release/bin_fit.h"
#include "proto/convert.h"

namespace dpcurator::client {
namespace {

constexpr char kDataDerivedAdvice[] =
    "Their bounds or categories (and suggested atoms and bins) were read from your rows.\n"
    "Registering a schema publishes it, and a minimum, a maximum or a rare category can be\n"
    "one person's value. For each marked column, replace the values with public ones (a\n"
    "codebook, a regulation, the instrument's range, domain knowledge), bins and atoms\n"
    "included, and delete the \"data_derived\" line, or pass\n"
    "--accept-data-derived to `datasets create` to publish them as they are.\n"
    "Numeric bounds trade utility for nothing when too wide: values are scaled by the declared\n"
    "width, so a range ten times wider than the data squeezes it into a tenth of the encoding\n"
    "and the noise costs more; the server cannot warn about it without reading the data.\n"
    "Take the tightest range that is public. See docs/schema.md.\n";

struct DraftInput {
  std::vector<std::string> names;
  std::vector<data::DraftHint> hints;
  std::optional<std::string> default_label;
  std::string label_reason;
  std::vector<bool> declared;  // categories declared by the file's header
};

absl::Status Located(const std::string& path, int64_t line, const absl::Status& status) {
  return absl::InvalidArgumentError(absl::StrCat(path, ":", line, ": ", status.message()));
}

absl::StatusOr<data::SchemaDraft> DraftFromArff(const std::string& path,
                                                const std::optional<std::string>& label,
                                                bool no_label, DraftInput* input) {
  std::ifstream stream(path);
  if (!stream) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  data::ArffReader reader(&stream, path);
  auto header = reader.ReadHeader();
  if (!header.ok()) return header.status();
  for (const data::ArffAttribute& attribute : header->attributes) {
    data::DraftHint hint;
    switch (attribute.kind) {
      case data::ArffAttribute::Kind::kNumeric:
        hint.kind = data::DraftHint::Kind::kNumeric;
        hint.integer = attribute.integer;
        break;
      case data::ArffAttribute::Kind::kNominal:
        hint.kind = data::DraftHint::Kind::kCategorical;
        hint.categories = attribute.values;
        break;
      case data::ArffAttribute::Kind::kString:
        hint.kind = data::DraftHint::Kind::kCategorical;
        break;
      case data::ArffAttribute::Kind::kDate:
        return absl::UnimplementedError(absl::StrCat(
            path, ":", attribute.line, ": attribute '", attribute.name,
            "' is a date; dates are not supported: convert it to a number (e.g. days since a "
            "public reference date) or drop it"));
    }
    input->names.push_back(attribute.name);
    input->declared.push_back(!hint.categories.empty());
    input->hints.push_back(std::move(hint));
  }
  const data::ArffAttribute& last = header->attributes.back();
  if (last.kind == data::ArffAttribute::Kind::kNominal && last.values.size() >= 2) {
    input->default_label = last.name;
    input->label_reason = "the last attribute, nominal: the ARFF convention for the class";
  }
  data::SchemaDrafter drafter(input->names, input->hints);
  std::vector<std::string> fields;
  while (true) {
    auto more = reader.Next(&fields);
    if (!more.ok()) return more.status();
    if (!*more) break;
    if (auto status = drafter.AddRow(fields, reader.line_number()); !status.ok()) {
      return Located(path, reader.line_number(), status);
    }
  }
  return drafter.Finish(no_label ? std::nullopt : label.has_value() ? label : input->default_label);
}

absl::StatusOr<data::SchemaDraft> DraftFromCsv(const std::string& path,
                                               const std::optional<std::string>& label,
                                               char delimiter, bool decimal_comma,
                                               DraftInput* input) {
  std::ifstream stream(path, std::ios::binary);
  if (!stream) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  data::CsvOptions options;
  options.delimiter = delimiter;
  data::CsvRecordReader reader(&stream, options);
  std::vector<std::string> fields;
  auto has_header = reader.Next(&fields);
  if (!has_header.ok())
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", has_header.status().message()));
  if (!*has_header) return absl::InvalidArgumentError(absl::StrCat(path, ": empty file"));
  for (const std::string& name : fields) {
    input->names.push_back(std::string(absl::StripAsciiWhitespace(name)));
  }
  if (fields.size() == 1) {
    // One column is rare; a file separated by another character is not.
    for (char other : {';', '\t', '|', ','}) {
      if (other != delimiter && fields[0].find(other) != std::string::npos) {
        std::fprintf(stderr,
                     "dpcurator: warning: %s: the header reads as one column '%s'; is the file "
                     "separated by '%s'? (--delimiter)\n",
                     path.c_str(), fields[0].c_str(), other == '\t' ? "tab" : std::string(1, other).c_str());
        break;
      }
    }
  }
  input->declared.assign(input->names.size(), false);
  data::SchemaDrafter drafter(input->names, {});
  while (true) {
    auto more = reader.Next(&fields);
    if (!more.ok())
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", more.status().message()));
    if (!*more) break;
    if (decimal_comma) {
      // "1,5" is 1.5 where the result is a number; other text stays as it is.
      for (std::string& field : fields) {
        if (field.find(',') == std::string::npos) continue;
        std::string point = field;
        std::replace(point.begin(), point.end(), ',', '.');
        double value = 0;
        if (absl::SimpleAtod(absl::StripAsciiWhitespace(point), &value)) field = point;
      }
    }
    if (auto status = drafter.AddRow(fields, reader.line_number()); !status.ok()) {
      return Located(path, reader.line_number(), status);
    }
  }
  return drafter.Finish(label);
}

// The categories' counts, rarest first (at most kShownCounts), for the
// report: a stray spelling ("femal" beside "Female") shows as a rare one.
constexpr size_t kShownCounts = 8;
std::string RarestCategories(const data::DraftColumn& column) {
  std::vector<std::pair<int64_t, std::string>> counted;
  for (size_t i = 0; i < column.category_counts.size() && i < column.categories.size(); ++i) {
    counted.emplace_back(column.category_counts[i], column.categories[i]);
  }
  std::stable_sort(counted.begin(), counted.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string text;
  for (size_t i = 0; i < counted.size() && i < kShownCounts; ++i) {
    absl::StrAppend(&text, i > 0 ? ", " : "", "'", counted[i].second, "' ", counted[i].first);
  }
  if (counted.size() > kShownCounts) absl::StrAppend(&text, ", ...");
  return text;
}

std::string Domain(const data::DraftColumn& column) {
  if (column.type == data::ColumnType::kNumeric) {
    return absl::StrFormat("[%g, %g]%s%s%s%s", column.lower, column.upper,
                           column.integer ? " integer" : "",
                           column.atoms.empty() ? "" : " atom 0",
                           column.nullable ? " +missing" : "",
                           column.bins.empty()
                               ? ""
                               : absl::StrCat(" ", column.bins.size() + 1, " bins").c_str());
  }
  std::string list = absl::StrJoin(column.categories, ",");
  if (list.size() > 28) list = absl::StrCat(list.substr(0, 25), "...");
  return absl::StrCat(column.categories.size(), ": ", list, column.nullable ? " +missing" : "");
}

absl::Status RunDraft(const ParsedArgs& args) {
  std::string path = args.Get("csv");
  bool arff = args.Has("arff");
  if (args.Has("csv") == arff) {
    return 
        absl::InvalidArgumentError("give exactly one of --csv FILE and --arff FILE");
  }
  if (arff) path = args.Get("arff");
  if (!arff && absl::EndsWithIgnoreCase(path, ".arff")) arff = true;
  std::optional<std::string> label;
  if (args.Has("label")) label = args.Get("label");
  if (args.Flag("no-label") && label.has_value()) {
    return absl::InvalidArgumentError("--label and --no-label contradict each other");
  }
  auto delimiter = ParseDelimiter(args.Get("delimiter"));
  if (!delimiter.ok()) return delimiter.status();
  if (arff && (!args.IsDefault("delimiter") || args.Flag("decimal-comma"))) {
    return absl::InvalidArgumentError(
        "--delimiter and --decimal-comma go with --csv (ARFF is comma-separated)");
  }
  if (args.Flag("decimal-comma") && *delimiter == ',') {
    return absl::InvalidArgumentError(
        "--decimal-comma needs another field separator: give --delimiter ';'");
  }
  DraftInput input;
  auto draft = arff ? DraftFromArff(path, label, args.Flag("no-label"), &input)
                    : DraftFromCsv(path, label, *delimiter, args.Flag("decimal-comma"), &input);
  if (!draft.ok()) return draft.status();
  const std::string json = DraftToSchemaJson(*draft);
  // Check the draft reads back as a schema, as `datasets create` will.
  if (auto check = ParseSchemaFileText(json, "the draft"); !check.ok()) {
    return check.status();
  }
  const std::string out = args.Get("out");
  FILE* report = stdout;
  if (out == "-") {
    std::fputs(json.c_str(), stdout);
    report = stderr;
  } else {
    std::ofstream output(out);
    if (!output || !(output << json)) {
      return absl::UnavailableError(absl::StrCat("cannot write '", out, "'"));
    }
  }
  std::fprintf(report, "drafted a schema for %zu columns from %lld rows of %s%s\n",
               draft->columns.size(), static_cast<long long>(draft->rows), path.c_str(),
               out == "-" ? "" : absl::StrCat(" into ", out).c_str());
  std::fprintf(report, "  %-24s %-12s %-36s %s\n", "column", "type", "domain", "source");
  std::vector<std::string> flagged;
  for (size_t c = 0; c < draft->columns.size(); ++c) {
    const data::DraftColumn& column = draft->columns[c];
    if (column.data_derived) flagged.push_back(column.name);
    std::fprintf(report, "  %-24s %-12s %-36s %s\n", column.name.c_str(),
                 column.type == data::ColumnType::kNumeric ? "numeric" : "categorical",
                 Domain(column).c_str(),
                 column.data_derived ? "DATA-DERIVED" : "declared in the file's header");
    for (const std::string& note : column.notes)
      std::fprintf(report, "      note: %s\n", note.c_str());
    if (!column.category_counts.empty()) {
      std::fprintf(report, "      counts, rarest first: %s\n", RarestCategories(column).c_str());
    }
  }
  if (draft->label.has_value()) {
    std::fprintf(report, "label: %s (%s; change it with --label, drop it with --no-label)\n",
                 draft->label->c_str(),
                 label.has_value() ? "from --label" : input.label_reason.c_str());
  } else {
    std::fprintf(report,
                 "no label column (name one with --label for DP-MERF and PEARL releases)\n");
  }
  if (!draft->left_out.empty()) {
    // Issue 38: every bad column at once, the others drafted; `upload`
    // ignores the file's columns the schema does not name.
    std::fprintf(report,
                 "\n%zu column(s) left out of the draft (fix them and draft again, or upload "
                 "without them: columns the schema does not name are ignored):\n",
                 draft->left_out.size());
    for (const data::DraftProblem& problem : draft->left_out) {
      std::fprintf(report, "  %s: %s\n", problem.column.c_str(), problem.message.c_str());
    }
  }
  if (!flagged.empty()) {
    std::fprintf(report, "\n%zu column(s) carry \"data_derived\": true: %s.\n%s", flagged.size(),
                 absl::StrJoin(flagged, ", ").c_str(), kDataDerivedAdvice);
  }
  return absl::OkStatus();
}

absl::Status RunCheck(const ParsedArgs& args) {
  auto file = ReadSchemaFileWithMarkers(args.Get("schema"));
  if (!file.ok()) return file.status();
  if (args.Flag("json")) {
    nlohmann::json out = {{"columns", file->schema.columns_size()},
                          {"label", file->schema.label()},
                          {"data_derived", file->data_derived}};
    std::printf("%s\n", out.dump(2).c_str());
    return file->data_derived.empty() ? absl::OkStatus() : QuietExit(4);
  }
  std::printf(
      "%s: a valid schema, %d columns%s\n", args.Get("schema").c_str(), file->schema.columns_size(),
      file->schema.label().empty() ? ", no label"
                                   : absl::StrCat(", label '", file->schema.label(), "'").c_str());
  if (!file->data_derived.empty()) {
    std::printf("still marked data_derived: %s\n%s",
                absl::StrJoin(file->data_derived, ", ").c_str(), kDataDerivedAdvice);
    return QuietExit(4);
  }
  return absl::OkStatus();
}


// The dataset's schema as a schema file (docs/schema.md), `notes[c]` as
// column c's "note" and `provenance` as the top-level "dp_release".
std::string SchemaToFileJson(const v1::TableSchema& schema,
                             const std::vector<std::string>& notes,
                             const nlohmann::ordered_json& provenance) {
  nlohmann::ordered_json out;
  out["columns"] = nlohmann::ordered_json::array();
  for (int c = 0; c < schema.columns_size(); ++c) {
    const v1::ColumnSchema& column = schema.columns(c);
    nlohmann::ordered_json j;
    j["name"] = column.name();
    if (column.type() == v1::ColumnSchema::NUMERIC) {
      j["type"] = "NUMERIC";
      j["lower"] = SchemaNumberJson(column.lower());
      j["upper"] = SchemaNumberJson(column.upper());
      if (column.integer()) j["integer"] = true;
      if (column.atoms_size() > 0) {
        j["atoms"] = nlohmann::ordered_json::array();
        for (double atom : column.atoms()) j["atoms"].push_back(SchemaNumberJson(atom));
      }
      if (column.bins_size() > 0) {
        j["bins"] = nlohmann::ordered_json::array();
        for (double edge : column.bins()) j["bins"].push_back(SchemaNumberJson(edge));
      }
      // Kept, or `datasets set-bins` would refuse the file as changing more
      // than bins.
      if (column.nullable()) j["nullable"] = true;
    } else {
      j["type"] = "CATEGORICAL";
      j["categories"] = std::vector<std::string>(column.categories().begin(),
                                                 column.categories().end());
      if (column.nullable()) j["nullable"] = true;
      // Kept: the server keeps an open column's values (issue 38), and
      // `datasets set-categories` takes the list for the same column.
      if (column.open()) j["open"] = true;
      if (!column.aliases().empty()) {
        // Sorted, so that the file is the same on every run.
        std::vector<std::pair<std::string, std::string>> aliases;
        for (const auto& [token, category] : column.aliases()) {
          aliases.emplace_back(token, category);
        }
        std::sort(aliases.begin(), aliases.end());
        nlohmann::ordered_json map = nlohmann::ordered_json::object();
        for (const auto& [token, category] : aliases) map[token] = category;
        j["aliases"] = std::move(map);
      }
    }
    if (static_cast<size_t>(c) < notes.size() && !notes[c].empty()) j["note"] = notes[c];
    out["columns"].push_back(std::move(j));
  }
  if (!schema.label().empty()) out["label"] = schema.label();
  out["dp_release"] = provenance;
  return out.dump(2) + "\n";
}

// Whether `text` is UTF-8 (a schema file is JSON text, and a category a
// proto3 string): well-formed sequences of 1 to 4 bytes, no overlong forms,
// no surrogates, nothing above U+10FFFF.
bool IsUtf8(absl::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    int length = 0;
    uint32_t code = 0;
    if (byte < 0x80) {
      ++i;
      continue;
    } else if ((byte & 0xE0) == 0xC0) {
      length = 2;
      code = byte & 0x1F;
    } else if ((byte & 0xF0) == 0xE0) {
      length = 3;
      code = byte & 0x0F;
    } else if ((byte & 0xF8) == 0xF0) {
      length = 4;
      code = byte & 0x07;
    } else {
      return false;
    }
    if (i + length > text.size()) return false;
    for (int k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      code = (code << 6) | (next & 0x3F);
    }
    const uint32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < smallest[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
      return false;
    }
    i += length;
  }
  return true;
}

// The catch-all level a fitted list ends with: "other", or "other_1",
// "other_2", ... when the release published that name.
std::string CatchAllName(const std::vector<std::string>& published) {
  const auto taken = [&](const std::string& name) {
    return std::find(published.begin(), published.end(), name) != published.end();
  };
  std::string name = "other";
  for (int k = 1; taken(name); ++k) name = absl::StrCat("other_", k);
  return name;
}

// `schema fit`'s last step, after its releases were charged: the fitted
// schema written to `out` once it reads back as a schema file; a failure
// to write says what was charged and how to replay it (`replay`).
absl::Status WriteFittedSchema(const v1::TableSchema& fitted,
                               const std::vector<std::string>& notes,
                               const nlohmann::ordered_json& provenance, const std::string& out,
                               const std::string& replay) {
  const std::string json = SchemaToFileJson(fitted, notes, provenance);
  if (auto check = ParseSchemaFileText(json, "the fitted schema"); !check.ok()) {
    return check.status();
  }
  std::ofstream output(out);
  if (!output || !(output << json)) {
    return absl::UnavailableError(absl::StrCat("cannot write '", out, "'. ", replay));
  }
  return absl::OkStatus();
}

// `schema fit --categories`: one category_fit release per open column
// (issue 38; docs/privacy.md 2.11.2), then the dataset's schema with each
// fitted column's categories = the published values and a catch-all LAST.
absl::Status RunCategoryFit(const ParsedArgs& args) {
  const std::string out = args.Get("out");
  {
    // Before any release is charged: a path that cannot be written fails now.
    std::ofstream probe(out, std::ios::app);
    if (!probe) {
      return absl::InvalidArgumentError(
          absl::StrCat("--out ", out, " cannot be written; nothing was requested"));
    }
  }
  if (args.Has("noise-multiplier") || !args.Has("epsilon")) {
    return absl::InvalidArgumentError(
        "schema fit --categories takes --epsilon (each column's release), not a noise "
        "multiplier; nothing was requested");
  }
  std::vector<std::string> columns;
  for (absl::string_view name : absl::StrSplit(args.Get("categories"), ',', absl::SkipEmpty())) {
    columns.emplace_back(absl::StripAsciiWhitespace(name));
  }
  if (columns.empty()) {
    return absl::InvalidArgumentError(
        "--categories needs the open categorical columns to fit, 'a,b'; nothing was requested");
  }
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  auto dataset = FindDataset(&*connection, args.Get("dataset"));
  if (!dataset.ok()) return dataset.status();
  v1::ReleaseRequest base;
  base.set_dataset_id(dataset->id());
  if (auto set = SetPrivacyLevel(args, &base); !set.ok()) return set;
  WarnIfUnlikelyEpsilon("--epsilon", base.epsilon());
  v1::CategoryFitParams params;
  if (args.Has("max-categories")) {
    auto parsed = args.GetInt("max-categories");
    if (!parsed.ok()) return parsed.status();
    params.set_max_categories(static_cast<int32_t>(
        std::clamp<int64_t>(*parsed, -1, std::numeric_limits<int32_t>::max())));
  }
  if (args.Has("delta-0")) {
    auto parsed = args.GetDouble("delta-0");
    if (!parsed.ok()) return parsed.status();
    params.set_delta_0(*parsed);
  }
  const std::string key = args.Has("key") ? args.Get("key") : NewIdempotencyKey();
  v1::TableSchema fitted = dataset->schema();
  std::vector<std::string> notes(fitted.columns_size());
  nlohmann::ordered_json releases = nlohmann::ordered_json::array();
  std::printf("fitting %zu column%s' categories, epsilon %g each (composed on the dataset's "
              "ledger)\n",
              columns.size(), columns.size() == 1 ? "" : "s", base.epsilon());
  for (size_t i = 0; i < columns.size(); ++i) {
    const std::string& name = columns[i];
    // One release per column, each its own key: a retry with the same
    // --key replays every column already released, at no charge.
    v1::ReleaseRequest request = base;
    request.set_idempotency_key(absl::StrCat(key, "/", name));
    *request.mutable_category_fit() = params;
    request.mutable_category_fit()->set_column(name);
    std::printf("[%zu/%zu] %s: requesting a category_fit release...\n", i + 1, columns.size(),
                name.c_str());
    std::fflush(stdout);
    v1::Release release;
    auto context = connection->NewContext();
    grpc::Status status = connection->releases().RequestRelease(context.get(), request, &release);
    if (!status.ok()) {
      return ReleaseRpcError(status, absl::StrCat("category_fit release of '", name, "'"),
                             request.idempotency_key());
    }
    if (!release.has_category_fit()) {
      return absl::InternalError(absl::StrCat(
          "release ", release.id(), " is not a category_fit release; fetch it with "
          "`dpcurator release get --id ", release.id(), "`"));
    }
    const v1::CategoryFitArtefact& fit = release.category_fit();
    int c = -1;
    for (int k = 0; k < fitted.columns_size(); ++k) {
      if (fitted.columns(k).name() == fit.column()) c = k;
    }
    if (c < 0) {
      return absl::InternalError(absl::StrCat("release ", release.id(), " fitted column '",
                                              fit.column(), "', which the schema does not have"));
    }
    // Post-processing of the release (docs/privacy.md 2.4): no further cost.
    std::vector<std::string> published;
    int not_text = 0;
    for (const std::string& value : fit.categories()) {
      if (IsUtf8(value)) {
        published.push_back(value);
      } else {
        ++not_text;
      }
    }
    const std::string catch_all = CatchAllName(published);
    v1::ColumnSchema& column = *fitted.mutable_columns(c);
    releases.push_back({{"column", fit.column()},
                        {"release_id", release.id()},
                        {"epsilon", fit.epsilon()},
                        {"delta_0", fit.delta_0()},
                        {"published", published.size()},
                        {"idempotency_key", request.idempotency_key()}});
    std::printf("[%zu/%zu] %s: %s release %s, epsilon %g; %zu value%s published (threshold "
                "%lld); dataset spent %.4g, remaining %.4g\n",
                i + 1, columns.size(), name.c_str(),
                release.replayed() ? "replayed stored" : "new", release.id().c_str(),
                fit.epsilon(), published.size(), published.size() == 1 ? "" : "s",
                static_cast<long long>(fit.threshold()), release.epsilon_spent_total(),
                release.epsilon_remaining());
    if (not_text > 0) {
      std::printf("  %d published value(s) are not UTF-8 text and cannot be schema categories: "
                  "they fall in the catch-all\n",
                  not_text);
    }
    if (published.empty()) {
      // A list of the catch-all alone would read every row as "other": the
      // column is left as it was (set-categories needs a real list).
      notes[c] = absl::StrCat("DP release ", release.id(), " published no value (threshold ",
                              fit.threshold(), "): categories left as they were");
      std::printf(
          "  no value of '%s' was shared by enough rows: its list would be \"%s\" alone, every "
          "row the same. Its categories are left as they were; ask for a larger --epsilon (a "
          "lower threshold), or use a column with fewer distinct values\n",
          name.c_str(), catch_all.c_str());
      continue;
    }
    column.clear_categories();
    for (const std::string& value : published) column.add_categories(value);
    column.add_categories(catch_all);
    // Aliases that name a category no longer listed would make the schema
    // invalid: they go (their spellings fall in the catch-all).
    std::vector<std::string> dropped;
    for (const auto& [token, category] : column.aliases()) {
      if (std::find(published.begin(), published.end(), category) == published.end()) {
        dropped.push_back(token);
      }
    }
    for (const std::string& token : dropped) column.mutable_aliases()->erase(token);
    notes[c] = absl::StrCat(
        published.size(), " categories from DP release ", release.id(), " (epsilon ",
        absl::StrFormat("%g", fit.epsilon()), ", threshold ", fit.threshold(), ", noise sigma ",
        absl::StrFormat("%g", fit.sigma()), "); the last, \"", catch_all,
        "\", stands for every value not listed",
        not_text > 0 ? absl::StrCat("; ", not_text, " published value(s) are not UTF-8 text "
                                    "and fall in it")
                     : "");
    std::printf("  %s: %zu categories, then \"%s\" for every value not listed\n", name.c_str(),
                published.size(), catch_all.c_str());
  }
  nlohmann::ordered_json provenance = {{"dataset_id", dataset->id()},
                                       {"delta", dataset->budget().delta()},
                                       {"schema_fingerprint", dataset->schema_fingerprint()},
                                       {"category_fit", releases}};
  DPC_RETURN_IF_ERROR(WriteFittedSchema(
      fitted, notes, provenance, out,
      absl::StrCat("The releases were made and charged: fit again from them at no charge with "
                   "the same --key ",
                   key)));
  std::printf("schema with the fitted categories written to %s (--key %s replays them)\n",
              out.c_str(), key.c_str());
  std::printf("next: dpcurator datasets set-categories --dataset %s --schema %s\n",
              dataset->id().c_str(), out.c_str());
  return absl::OkStatus();
}

absl::Status RunFit(const ParsedArgs& args) {
  if (args.Has("categories")) {
    if (args.Has("columns") || (args.Has("bins") && !args.IsDefault("bins"))) {
      return absl::InvalidArgumentError(
          "--categories fits open categorical columns' lists; --columns and --bins fit numeric "
          "columns' bins: run them as two commands. Nothing was requested");
    }
    return RunCategoryFit(args);
  }
  const std::string out = args.Get("out");
  {
    // Before the release is charged: a path that cannot be written fails now.
    std::ofstream probe(out, std::ios::app);
    if (!probe) {
      return absl::InvalidArgumentError(
          absl::StrCat("--out ", out, " cannot be written; nothing was requested"));
    }
  }
  auto bins = args.GetInt("bins");
  if (!bins.ok()) return bins.status();
  if (*bins < 2 || *bins > data::kMaxBinEdges) {
    return absl::InvalidArgumentError(
        absl::StrCat("--bins must be between 2 and ", data::kMaxBinEdges, ", got ", *bins));
  }
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  auto dataset = FindDataset(&*connection, args.Get("dataset"));
  if (!dataset.ok()) return dataset.status();
  for (const v1::ColumnSchema& column : dataset->schema().columns()) {
    if (column.type() == v1::ColumnSchema::IMAGE) {
      return absl::InvalidArgumentError("schema fit is for tables; this dataset has images");
    }
  }
  // The release: the marginals release of the chosen numeric columns'
  // 1-way tables over the fit grid (the server refuses anything else before
  // admission: a column that is not numeric, an unknown one).
  v1::ReleaseRequest request;
  request.set_dataset_id(dataset->id());
  request.set_idempotency_key(args.Has("key") ? args.Get("key") : NewIdempotencyKey());
  if (auto set = SetPrivacyLevel(args, &request); !set.ok()) return set;
  if (args.Has("epsilon")) WarnIfUnlikelyEpsilon("--epsilon", request.epsilon());
  v1::MarginalsParams& params = *request.mutable_marginals();
  params.set_fit_grid(true);
  for (absl::string_view name : absl::StrSplit(args.Get("columns"), ',', absl::SkipEmpty())) {
    params.add_cliques()->add_columns(std::string(absl::StripAsciiWhitespace(name)));
  }
  v1::Release release;
  auto context = connection->NewContext();
  grpc::Status status = connection->releases().RequestRelease(context.get(), request, &release);
  if (!status.ok()) return ReleaseRpcError(status, "bin-fit release", request.idempotency_key());
  if (release.state() == v1::RELEASE_STATE_PENDING || !release.has_marginals() ||
      !release.marginals().fit_grid()) {
    return absl::InternalError(absl::StrCat(
        "release ", release.id(), " is not a bin-fit marginals release; fetch it with "
        "`dpcurator release get --id ", release.id(), "`"));
  }
  const v1::MarginalsArtefact& artefact = release.marginals();
  auto grid = SchemaFromProto(artefact.schema());
  if (!grid.ok()) return grid.status();
  // The per-cell noise std the release drew: public, in the artefact.
  const double noise_std = artefact.noise_multiplier() * artefact.sensitivity();
  v1::TableSchema fitted = dataset->schema();
  std::vector<std::string> notes(fitted.columns_size());
  std::printf("fitted bins from release %s (epsilon %g, noise std %.3g per cell):\n",
              release.id().c_str(), artefact.epsilon(), noise_std);
  for (const v1::NoisyMarginalTable& table : artefact.tables()) {
    if (table.clique_size() != 1 || table.clique(0) < 0 ||
        table.clique(0) >= fitted.columns_size() || table.clique(0) >= grid->num_columns()) {
      return absl::InternalError("the bin-fit release holds a table that is not one column's");
    }
    const int c = table.clique(0);
    Eigen::VectorXd counts(table.counts_size());
    for (int i = 0; i < table.counts_size(); ++i) counts[i] = table.counts(i);
    // Post-processing of the release (docs/privacy.md 2.4): no further cost.
    const release::FittedBins fit = release::FitBinsFromNoisyCounts(
        grid->column(c), counts, noise_std, static_cast<int>(*bins));
    v1::ColumnSchema& column = *fitted.mutable_columns(c);
    // The fitted edges cover the bulk only (cells under the noise threshold
    // count as empty): geometric edges beyond them give the tails bins of
    // their own instead of one stretched to the declared bound
    // (release::WithTailEdges). Post-processing still.
    const std::vector<double> edges = release::WithTailEdges(grid->column(c), fit.edges);
    column.clear_bins();
    for (double edge : edges) column.add_bins(edge);
    // The bounds are fixed once rows are stored (values were clamped to
    // them): a suggestion for a new dataset, never applied here.
    notes[c] = absl::StrCat(edges.size() + 1, " bins fitted from DP release ", release.id(),
                            "; suggested bounds [", absl::StrFormat("%g", fit.lower), ", ",
                            absl::StrFormat("%g", fit.upper),
                            "] (not applied: the stored rows were clamped to the declared ones)");
    std::printf("  %-24s %zu edges%s; suggested bounds [%g, %g] (declared [%g, %g])\n",
                column.name().c_str(), edges.size(),
                edges.empty() ? " (nothing above the noise: the default bins)" : "",
                fit.lower, fit.upper, column.lower(), column.upper());
  }
  nlohmann::ordered_json provenance = {{"release_id", release.id()},
                                       {"dataset_id", release.dataset_id()},
                                       {"epsilon", artefact.epsilon()},
                                       {"delta", artefact.delta()},
                                       {"schema_fingerprint", artefact.schema_fingerprint()}};
  DPC_RETURN_IF_ERROR(WriteFittedSchema(
      fitted, notes, provenance, out,
      absl::StrCat("The release was made and charged: fit again from it at no charge with the "
                   "same --key ",
                   request.idempotency_key())));
  std::printf("%s %s: epsilon %g for this release; dataset spent %.4g, remaining %.4g\n",
              release.replayed() ? "replayed stored release" : "released", release.id().c_str(),
              artefact.epsilon(), release.epsilon_spent_total(), release.epsilon_remaining());
  std::printf("schema with the fitted bins written to %s (idempotency key %s)\n", out.c_str(),
              request.idempotency_key().c_str());
  return absl::OkStatus();
}

}  // namespace

std::vector<Command> SchemaCommands() {
  std::vector<Command> commands;
  commands.push_back(Command{
      "schema draft",
      "draft a schema from your own CSV or ARFF file, locally (curator)",
      "Reads the file on this machine (nothing is sent anywhere) and writes schema JSON:\n"
      "column names, types (ARFF numeric/real/integer and {nominal} are taken from the header;\n"
      "CSV columns are numeric when every present value is a number), bounds, categories,\n"
      "nullable where '?' or an empty cell occurs, and a label. Every bound and category list\n"
      "read from the rows carries \"data_derived\": true; `datasets create` refuses those\n"
      "until you replace them with public values (and delete the marker) or pass\n"
      "--accept-data-derived. A numeric column with at least 20% exact zeros gets the atom 0\n"
      "suggested (data-derived too). A numeric column whose values the default 16\n"
      "equal-width bins would crowd (over 40% in one bin) gets bins suggested: a round 1-2-5\n"
      "log scale, or quantile-like edges rounded to 2 significant digits (data-derived too).\n"
      "Columns that cannot be drafted (a bad value, no values, an identifier) are left out\n"
      "and listed with what to do; the others are drafted. The report shows each category's\n"
      "count, rarest first, so that stray spellings show; the counts are never written into\n"
      "the schema.\n"
      "A UTF-8 byte order mark is ignored; --delimiter reads ';'- or tab-separated files.\n"
      "--decimal-comma reads \"1,5\" as 1.5 (with --delimiter ';'), as `upload` does.",
      {{"csv", "", "CSV file with a header line (a .arff name is read as ARFF)"},
       {"delimiter", ",", "with --csv: the field separator (one character, or tab)"},
       {"decimal-comma", "", "with --csv: numbers use a decimal comma (1,5)", true},
       {"arff", "", "ARFF file (@attribute header and @data rows)"},
       {"out", "-", "schema file to write; - for standard output (the report goes to stderr)"},
       {"label", "", "label column (default for ARFF: the last attribute when nominal; CSV: none)"},
       {"no-label", "", "draft without a label column", true}},
      RunDraft});
  commands.push_back(Command{
      "schema check",
      "validate a schema file and list columns still marked data_derived",
      "Exit status 0: valid and no markers; 4: valid, markers remain; 2: invalid (the error\n"
      "names the column and field and lists the accepted values).",
      {{"schema", "", "schema JSON file", false, true},
       {"json", "", "print JSON (docs/json.md)", true}},
      RunCheck});
  commands.push_back(Command{
      "schema fit",
      "fit numeric columns' bins from a small DP release of the stored rows (analyst, curator)",
      "For a dataset whose numeric columns have wide public bounds and no good bins: one\n"
      "marginals release (charged to the dataset's ledger, once) of the chosen numeric\n"
      "columns' counts over a fine grid fixed by their declared bounds, then, on this machine\n"
      "(post-processing, no further cost), --bins equal-share bins per column from the noisy\n"
      "counts, edges rounded to 2 significant digits. Writes the dataset's schema with those\n"
      "bins, marked \"dp_release\" (release id, epsilon), and per column a note with suggested\n"
      "narrower bounds (not applied: the stored rows were clamped to the declared ones).\n"
      "Retrying with the same --key fits again from the stored release at no charge.\n"
      "docs/schema.md, docs/privacy.md 2.11.1.\n\n"
      "With --categories (issue 38): for categorical columns declared \"open\" (no public\n"
      "list; the server keeps their values), one category_fit release per column, each\n"
      "charged to the dataset's ledger at --epsilon (k columns: k releases, composed). It\n"
      "publishes the values that enough rows share: each value's count gets discrete\n"
      "Gaussian noise and only those above a threshold are published, so a value only one\n"
      "or a few people have is not (its chance is delta_0, a tenth of the dataset's delta by\n"
      "default). A smaller epsilon means more noise, a higher threshold and fewer values.\n"
      "Writes the schema with each column's categories = the published values, then a\n"
      "catch-all \"other\" LAST (\"other_1\" if \"other\" was published) for every value not\n"
      "listed, \"open\" kept; then give it to `dpcurator datasets set-categories`.\n"
      "docs/privacy.md 2.11.2.\n\n"
      "  dpcurator schema fit --dataset ds_... --epsilon 0.1 --columns income --out fit.json\n"
      "  dpcurator schema fit --dataset ds_... --epsilon 0.1 --categories city --out fit.json",
      WithConnection({{"dataset", "", "dataset id or name", false, true},
                      {"epsilon", "", "epsilon of the release (at the dataset's delta)"},
                      {"noise-multiplier", "", "explicit noise multiplier instead of --epsilon"},
                      {"columns", "", "numeric columns 'a,b' (default: every numeric column)"},
                      {"bins", "16", "bins per column (2 to 1024)"},
                      {"categories", "",
                       "open categorical columns 'a,b': fit their category lists instead "
                       "(one release per column at --epsilon each)"},
                      {"max-categories", "",
                       "with --categories: publish at most this many values a column (default "
                       "1,000; at most 10,000)"},
                      {"delta-0", "",
                       "with --categories: the chance that a value only one row has is "
                       "published (default: a tenth of the dataset's delta)"},
                      {"key", "", "idempotency key (default: a fresh random key)"},
                      {"out", "", "schema file to write", false, true}}),
      RunFit});
  return commands;
}

}  // namespace dpcurator::client
