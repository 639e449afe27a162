#include "core/data/arff.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace dpcurator::data {
namespace {

// Drops an unquoted '%' and what follows it (Weka's tokenizer reads '%' as a
// comment character anywhere outside quotes).
absl::string_view StripComment(absl::string_view line) {
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quote != 0) {
      if (c == '\\') {
        ++i;
      } else if (c == quote) {
        quote = 0;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '%') {
      return line.substr(0, i);
    }
  }
  return line;
}

// Reads one possibly quoted token from the front of `text` (after leading
// whitespace); unquoted tokens end at whitespace. Advances `text`.
absl::StatusOr<std::string> TakeName(absl::string_view* text) {
  *text = absl::StripLeadingAsciiWhitespace(*text);
  if (text->empty()) return absl::InvalidArgumentError("missing attribute name");
  std::string name;
  const char first = text->front();
  if (first == '\'' || first == '"') {
    size_t i = 1;
    for (; i < text->size(); ++i) {
      const char c = (*text)[i];
      if (c == '\\' && i + 1 < text->size()) {
        name.push_back((*text)[++i]);
      } else if (c == first) {
        break;
      } else {
        name.push_back(c);
      }
    }
    if (i >= text->size()) {
      return absl::InvalidArgumentError(absl::StrCat("unterminated quote in name ", *text));
    }
    text->remove_prefix(i + 1);
    return name;
  }
  size_t end = 0;
  while (end < text->size() && !absl::ascii_isspace(static_cast<unsigned char>((*text)[end])) &&
         (*text)[end] != '{') {
    ++end;
  }
  name = std::string(text->substr(0, end));
  text->remove_prefix(end);
  return name;
}

char Unescape(char c) {
  switch (c) {
    case 'n':
      return '\n';
    case 't':
      return '\t';
    case 'r':
      return '\r';
    default:
      return c;
  }
}

}  // namespace

absl::StatusOr<std::vector<std::string>> SplitArffValues(absl::string_view text) {
  std::vector<std::string> values;
  size_t i = 0;
  const size_t n = text.size();
  while (true) {
    while (i < n && absl::ascii_isspace(static_cast<unsigned char>(text[i]))) ++i;
    std::string value;
    if (i < n && (text[i] == '\'' || text[i] == '"')) {
      const char quote = text[i++];
      bool closed = false;
      while (i < n) {
        const char c = text[i++];
        if (c == '\\' && i < n) {
          value.push_back(Unescape(text[i++]));
        } else if (c == quote) {
          closed = true;
          break;
        } else {
          value.push_back(c);
        }
      }
      if (!closed) {
        return absl::InvalidArgumentError(
            absl::StrCat("unterminated ", std::string(1, quote), "-quoted value"));
      }
      while (i < n && absl::ascii_isspace(static_cast<unsigned char>(text[i]))) ++i;
      if (i < n && text[i] != ',') {
        return absl::InvalidArgumentError(absl::StrCat("unexpected text after the quoted value '",
                                                       value, "' (expected a comma)"));
      }
    } else {
      const size_t start = i;
      while (i < n && text[i] != ',') ++i;
      value = std::string(absl::StripAsciiWhitespace(text.substr(start, i - start)));
    }
    values.push_back(std::move(value));
    if (i >= n) break;
    ++i;  // the comma
  }
  return values;
}

absl::Status ArffReader::Error(int64_t line, absl::string_view message) const {
  return absl::InvalidArgumentError(absl::StrCat(source_, ":", line, ": ", message));
}

absl::StatusOr<ArffHeader> ArffReader::ReadHeader() {
  ArffHeader header;
  std::string raw;
  while (std::getline(*input_, raw)) {
    ++line_;
    absl::string_view line = absl::StripAsciiWhitespace(StripComment(raw));
    if (line.empty()) continue;
    size_t keyword_end = 0;
    while (keyword_end < line.size() &&
           !absl::ascii_isspace(static_cast<unsigned char>(line[keyword_end]))) {
      ++keyword_end;
    }
    const std::string keyword = absl::AsciiStrToLower(line.substr(0, keyword_end));
    absl::string_view rest = line.substr(keyword_end);
    if (keyword == "@relation") {
      auto name = TakeName(&rest);
      if (!name.ok()) return Error(line_, name.status().message());
      header.relation = *name;
    } else if (keyword == "@attribute") {
      ArffAttribute attribute;
      attribute.line = line_;
      auto name = TakeName(&rest);
      if (!name.ok()) return Error(line_, name.status().message());
      if (name->empty()) return Error(line_, "empty attribute name");
      attribute.name = *name;
      rest = absl::StripAsciiWhitespace(rest);
      if (absl::StartsWith(rest, "{")) {
        if (!absl::EndsWith(rest, "}")) {
          return Error(line_, absl::StrCat("attribute '", attribute.name,
                                           "': nominal values must end with '}'"));
        }
        auto values = SplitArffValues(rest.substr(1, rest.size() - 2));
        if (!values.ok()) {
          return Error(
              line_, absl::StrCat("attribute '", attribute.name, "': ", values.status().message()));
        }
        if (values->size() == 1 && values->front().empty()) values->clear();
        attribute.kind = ArffAttribute::Kind::kNominal;
        attribute.values = *std::move(values);
      } else {
        size_t type_end = 0;
        while (type_end < rest.size() &&
               !absl::ascii_isspace(static_cast<unsigned char>(rest[type_end]))) {
          ++type_end;
        }
        const std::string type = absl::AsciiStrToLower(rest.substr(0, type_end));
        if (type == "numeric" || type == "real") {
          attribute.kind = ArffAttribute::Kind::kNumeric;
        } else if (type == "integer") {
          attribute.kind = ArffAttribute::Kind::kNumeric;
          attribute.integer = true;
        } else if (type == "string") {
          attribute.kind = ArffAttribute::Kind::kString;
        } else if (type == "date") {
          attribute.kind = ArffAttribute::Kind::kDate;
        } else {
          return Error(line_, absl::StrCat("attribute '", attribute.name, "': unknown type '", type,
                                           "' (accepted, case-insensitive: numeric, real, integer, "
                                           "string, date, or a nominal list {a,b,...})"));
        }
      }
      header.attributes.push_back(std::move(attribute));
    } else if (keyword == "@data") {
      if (header.attributes.empty()) return Error(line_, "@data before any @attribute");
      num_attributes_ = header.attributes.size();
      return header;
    } else {
      return Error(line_, absl::StrCat("expected @relation, @attribute or @data, got '",
                                       line.substr(0, 40), "'"));
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat(source_, ": no @data line (is this an ARFF file?)"));
}

absl::StatusOr<bool> ArffReader::Next(std::vector<std::string>* fields) {
  fields->clear();
  std::string raw;
  while (std::getline(*input_, raw)) {
    ++line_;
    absl::string_view line = absl::StripAsciiWhitespace(StripComment(raw));
    if (line.empty()) continue;
    row_line_ = line_;
    if (line.front() == '{') {
      return Error(line_,
                   "sparse ARFF rows ({index value, ...}) are not supported; write the "
                   "rows out in full");
    }
    auto values = SplitArffValues(line);
    if (!values.ok()) return Error(line_, values.status().message());
    if (num_attributes_ != 0 && values->size() != num_attributes_) {
      return Error(line_, absl::StrCat("row has ", values->size(), " values, the header declares ",
                                       num_attributes_, " attributes"));
    }
    *fields = *std::move(values);
    return true;
  }
  return false;
}

}  // namespace dpcurator::data
