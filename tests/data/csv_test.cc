#include "core/data/csv.h"

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace dpcurator::data {
namespace {

using Records = std::vector<std::vector<std::string>>;

absl::StatusOr<Records> ReadAll(const std::string& text, CsvOptions options = {},
                                std::vector<int64_t>* lines = nullptr) {
  std::istringstream input(text);
  CsvRecordReader reader(&input, options);
  Records records;
  std::vector<std::string> fields;
  while (true) {
    auto has = reader.Next(&fields);
    if (!has.ok()) return has.status();
    if (!*has) break;
    records.push_back(fields);
    if (lines != nullptr) lines->push_back(reader.line_number());
  }
  return records;
}

TEST(CsvRecordReaderTest, PlainFieldsKeepWhitespace) {
  EXPECT_EQ(ReadAll("a,b , c\n1,2,3\n").value(), (Records{{"a", "b ", " c"}, {"1", "2", "3"}}));
}

TEST(CsvRecordReaderTest, QuotesAndEscapedQuotes) {
  EXPECT_EQ(ReadAll("\"a,b\",\"say \"\"hi\"\"\",\"\"\n").value(),
            (Records{{"a,b", "say \"hi\"", ""}}));
  // A quoted field may hold newlines; leading whitespace before the quote is dropped.
  EXPECT_EQ(ReadAll("x, \"multi\nline\",z\n").value(), (Records{{"x", "multi\nline", "z"}}));
  // Empty fields at both ends.
  EXPECT_EQ(ReadAll(",a,\n").value(), (Records{{"", "a", ""}}));
}

TEST(CsvRecordReaderTest, CrlfBlankLinesAndLastLineWithoutNewline) {
  std::vector<int64_t> lines;
  EXPECT_EQ(ReadAll("h1,h2\r\n\r\n1,2\r\n\n\n3,4", {}, &lines).value(),
            (Records{{"h1", "h2"}, {"1", "2"}, {"3", "4"}}));
  EXPECT_EQ(lines, (std::vector<int64_t>{1, 3, 6}));
  EXPECT_EQ(ReadAll("").value(), Records{});
  EXPECT_EQ(ReadAll("\n\r\n\n").value(), Records{});
}

TEST(CsvRecordReaderTest, OtherDelimiter) {
  CsvOptions options;
  options.delimiter = ';';
  EXPECT_EQ(ReadAll("a;b,c;\"d;e\"\n", options).value(), (Records{{"a", "b,c", "d;e"}}));
}

// The record reader as it was before it read in blocks (one istream::get
// per byte), kept here as the oracle of the rules: the block reader must
// split every input into the same records, lines and errors.
class ReferenceRecordReader {
 public:
  ReferenceRecordReader(std::istream* input, CsvOptions options)
      : input_(input), options_(options) {}

  absl::StatusOr<bool> Next(std::vector<std::string>* fields) {
    fields->clear();
    if (!started_) {
      started_ = true;
      constexpr unsigned char kBom[] = {0xEF, 0xBB, 0xBF};
      for (unsigned char expected : kBom) {
        const int ch = input_->peek();
        if (ch != expected) break;
        pushback_.push_back(static_cast<char>(input_->get()));
      }
      if (pushback_.size() == sizeof(kBom)) pushback_.clear();
    }
    std::string field;
    bool in_quotes = false;
    bool field_was_quoted = false;
    bool any_char = false;
    int64_t record_bytes = 0;
    // drop_malformed_records: a record is one line. An LF ends it inside
    // quotes too (a malformed record), and a record past the limit is read
    // to its line's end by the same rules, its error returned there; blank
    // lines are not part of a record and do not count towards the limit.
    const bool resync = options_.drop_malformed_records;
    bool overflowing = false;
    const auto too_long = [&] {
      return absl::InvalidArgumentError(absl::StrCat(
          "line ", record_line_, ": record longer than ", options_.max_record_bytes, " bytes"));
    };
    const auto unclosed = [&] {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", record_line_, ": quoted field not closed on its line"));
    };
    record_line_ = line_ + 1;
    while (true) {
      const int ch = Get();
      if (ch == std::char_traits<char>::eof()) {
        if (!any_char) return false;
        if (overflowing) return too_long();
        if (in_quotes) {
          if (resync) return unclosed();
          return absl::InvalidArgumentError(
              absl::StrCat("line ", record_line_, ": unterminated quoted field at end of input"));
        }
        fields->push_back(std::move(field));
        ++line_;
        return true;
      }
      if (++record_bytes > options_.max_record_bytes) {
        if (!resync) return too_long();
        overflowing = true;
      }
      const char c = static_cast<char>(ch);
      if (in_quotes) {
        if (c == '"') {
          if (Peek() == '"') {
            Get();
            field.push_back('"');
          } else {
            in_quotes = false;
          }
        } else {
          if (c == '\n') {
            ++line_;
            if (resync) return overflowing ? too_long() : unclosed();
          }
          field.push_back(c);
        }
        continue;
      }
      if (c == '\r') continue;
      if (c == '\n') {
        ++line_;
        if (!any_char) {
          record_line_ = line_ + 1;
          if (resync) {
            record_bytes = 0;
            overflowing = false;
          }
          continue;
        }
        if (overflowing) return too_long();
        fields->push_back(std::move(field));
        return true;
      }
      any_char = true;
      if (c == options_.delimiter) {
        fields->push_back(std::move(field));
        field.clear();
        field_was_quoted = false;
      } else if (c == '"' && absl::StripAsciiWhitespace(field).empty() && !field_was_quoted) {
        in_quotes = true;
        field_was_quoted = true;
        field.clear();
      } else {
        field.push_back(c);
      }
    }
  }
  int64_t line_number() const { return record_line_; }

 private:
  int Get() {
    if (!pushback_.empty()) {
      const int ch = static_cast<unsigned char>(pushback_.front());
      pushback_.erase(0, 1);
      return ch;
    }
    return input_->get();
  }
  int Peek() {
    if (!pushback_.empty()) return static_cast<unsigned char>(pushback_.front());
    return input_->peek();
  }

  std::istream* input_;
  CsvOptions options_;
  bool started_ = false;
  std::string pushback_;
  int64_t line_ = 0;
  int64_t record_line_ = 0;
};

// Every record, its line and the final error (or "end"), as text. With
// drop_malformed_records an error is written and reading goes on.
template <typename Reader>
std::string Transcript(const std::string& text, const CsvOptions& options) {
  std::istringstream input(text);
  Reader reader(&input, options);
  std::string out;
  std::vector<std::string> fields;
  for (int records = 0; records < 10000; ++records) {
    auto has = reader.Next(&fields);
    if (!has.ok() && options.drop_malformed_records) {
      absl::StrAppend(&out, "error: ", has.status().message(), "\n");
      continue;
    }
    if (!has.ok()) return absl::StrCat(out, "error: ", has.status().message());
    if (!*has) return absl::StrCat(out, "end");
    absl::StrAppend(&out, reader.line_number(), ":");
    for (const std::string& field : fields) absl::StrAppend(&out, "[", absl::CEscape(field), "]");
    out += "\n";
  }
  return out;
}

// Random texts over the bytes that have rules (delimiters, quotes, CR, LF,
// whitespace, a byte order mark's bytes), read with blocks of 1 to 9 bytes
// (records, quote pairs and the mark straddle blocks) and with the default
// block, under short record limits: the same transcript as the oracle.
TEST(CsvRecordReaderTest, BlockReaderSplitsAsTheByteReader) {
  std::mt19937_64 random(20261127);
  const std::string alphabet[] = {"a", "b", " ", ",", ";", "\"", "\"\"", "\r", "\n",
                                  "\r\n", "\t", "\xEF", "\xEF\xBB\xBF", "x y"};
  int differences = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::string text;
    const int pieces = static_cast<int>(random() % 40);
    for (int i = 0; i < pieces; ++i) text += alphabet[random() % std::size(alphabet)];
    CsvOptions options;
    options.delimiter = random() % 4 == 0 ? ';' : ',';
    options.max_record_bytes =
        random() % 3 == 0 ? 1 + static_cast<int64_t>(random() % 12) : int64_t{1} << 20;
    options.read_block_bytes = random() % 4 == 0 ? kCsvReadBlockBytes : 1 + random() % 9;
    const std::string expected = Transcript<ReferenceRecordReader>(text, options);
    const std::string actual = Transcript<CsvRecordReader>(text, options);
    if (expected != actual && ++differences <= 5) {
      ADD_FAILURE() << "input '" << absl::CEscape(text) << "' block " << options.read_block_bytes
                    << " limit " << options.max_record_bytes << "\nexpected:\n"
                    << expected << "\nactual:\n"
                    << actual;
    }
  }
  EXPECT_EQ(differences, 0);
}

// The scale-out partials' mode (issue 37 item 3): a record is one line, a
// record past the limit is skipped to its line's end, holding none of its
// bytes, and the next record is read as if it had been short: the same
// transcript as the byte reader's, which reads every byte by the rules,
// under tiny limits and blocks.
TEST(CsvRecordReaderTest, OverLongRecordsAreSkippedAsTheByteReaderSkipsThem) {
  std::mt19937_64 random(20261128);
  const std::string alphabet[] = {"a", "b", " ", ",", "\"", "\"\"", "\r", "\n", "\r\n",
                                  "\t", "x y", "long field", "\" , \""};
  int differences = 0;
  int skipped = 0;
  int unclosed = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::string text;
    const int pieces = static_cast<int>(random() % 40);
    for (int i = 0; i < pieces; ++i) text += alphabet[random() % std::size(alphabet)];
    CsvOptions options;
    options.drop_malformed_records = true;
    options.max_record_bytes =
        random() % 3 == 0 ? int64_t{1} << 20 : 1 + static_cast<int64_t>(random() % 12);
    options.read_block_bytes = random() % 4 == 0 ? kCsvReadBlockBytes : 1 + random() % 9;
    const std::string expected = Transcript<ReferenceRecordReader>(text, options);
    const std::string actual = Transcript<CsvRecordReader>(text, options);
    skipped += absl::StrContains(expected, "longer than") ? 1 : 0;
    unclosed += absl::StrContains(expected, "not closed on its line") ? 1 : 0;
    if (expected != actual && ++differences <= 5) {
      ADD_FAILURE() << "input '" << absl::CEscape(text) << "' block " << options.read_block_bytes
                    << " limit " << options.max_record_bytes << "\nexpected:\n"
                    << expected << "\nactual:\n"
                    << actual;
    }
  }
  EXPECT_EQ(differences, 0);
  EXPECT_GT(skipped, 1000);  // the cases are exercised
  EXPECT_GT(unclosed, 1000);
}

// drop_malformed_records frames by line (docs/privacy.md 6.5): a record
// ends at the end of its line whatever its quotes, so that the number of
// records is the number of lines and never depends on what a line holds. A
// quote left open at the line's end makes that line one malformed record,
// and the next line starts the next one; an over-long record also ends at
// its line's end. Uploads keep RFC 4180's quoted line ends.
TEST(CsvRecordReaderTest, DropModeEndsEveryRecordAtItsLine) {
  CsvOptions drop;
  drop.drop_malformed_records = true;
  const std::string text = "a,b\n1,\"x\n2,y\n\"3\",\"z\"\"\r\n4,\"p\nq\",r\n\n5,6";
  EXPECT_EQ(Transcript<CsvRecordReader>(text, drop),
            "1:[a][b]\n"
            "error: line 2: quoted field not closed on its line\n"
            "3:[2][y]\n"
            "error: line 4: quoted field not closed on its line\n"
            "error: line 5: quoted field not closed on its line\n"
            "6:[q\\\"][r]\n"
            "8:[5][6]\n"
            "end");
  // The same text as an upload reads it: quoted line ends are the field's.
  EXPECT_EQ(Transcript<CsvRecordReader>(text, CsvOptions{}),
            "1:[a][b]\n"
            "2:[1][x\\n2,y\\n3\\\"][z\\\"\\r\\n4,p]\n"
            "6:[q\\\"][r]\n"
            "8:[5][6]\n"
            "end");
  // At the end of input too, and past the record limit (the rest of the
  // line is skipped, quotes or not).
  drop.max_record_bytes = 8;
  EXPECT_EQ(Transcript<CsvRecordReader>("h\n\"abc\n\"0123456789\"\",\n7\n\"x", drop),
            "1:[h]\n"
            "error: line 2: quoted field not closed on its line\n"
            "error: line 3: record longer than 8 bytes\n"
            "4:[7]\n"
            "error: line 5: quoted field not closed on its line\n"
            "end");
  // Blank lines (nothing but CRs) are not records, in either mode.
  EXPECT_EQ(Transcript<CsvRecordReader>("\r\n\"\n\r\r\n\r\rx\n", drop),
            "error: line 2: quoted field not closed on its line\n"
            "4:[x]\n"
            "end");
}

// The number of records a drop-mode read gives, good or malformed, is the
// number of non-blank lines (a blank line holds nothing but CRs), and each
// starts on the next of them: random texts over the bytes that have rules,
// under tiny limits and blocks.
TEST(CsvRecordReaderTest, DropModeRecordsAreTheNonBlankLines) {
  std::mt19937_64 random(20261129);
  const std::string alphabet[] = {"a", " ", ",", "\"", "\"\"", "\r", "\n", "\r\n", "x y",
                                  "\" , \"", "\"\n\"", "\xEF\xBB\xBF"};
  for (int trial = 0; trial < 5000; ++trial) {
    std::string text;
    const int pieces = static_cast<int>(random() % 40);
    for (int i = 0; i < pieces; ++i) text += alphabet[random() % std::size(alphabet)];
    CsvOptions options;
    options.drop_malformed_records = true;
    options.max_record_bytes =
        random() % 2 == 0 ? 1 + static_cast<int64_t>(random() % 12) : int64_t{1} << 20;
    options.read_block_bytes = random() % 4 == 0 ? kCsvReadBlockBytes : 1 + random() % 9;
    std::vector<int64_t> expected;
    int64_t line = 1;
    size_t start = 0;
    // A leading byte order mark is not part of the first line.
    if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) start = 3;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      if (text.find_first_not_of('\r', start) < end) expected.push_back(line);
      ++line;
      start = end + 1;
    }
    std::istringstream input(text);
    CsvRecordReader reader(&input, options);
    std::vector<int64_t> actual;
    std::vector<std::string> fields;
    while (actual.size() <= expected.size()) {
      const absl::StatusOr<bool> has = reader.Next(&fields);
      if (has.ok() && !*has) break;
      actual.push_back(reader.line_number());
      if (!has.ok()) {
        EXPECT_TRUE(absl::StartsWith(has.status().message(),
                                     absl::StrCat("line ", reader.line_number(), ": ")))
            << has.status();
      }
    }
    EXPECT_EQ(actual, expected) << absl::CEscape(text);
    if (actual != expected) break;
  }
}

// Spreadsheet exports start with a UTF-8 byte order mark; it is not part of
// the first column's name (issue 25: "\ufeff Patient Age"). Bytes that only
// begin like one are kept.
TEST(CsvRecordReaderTest, ByteOrderMarkIsDropped) {
  EXPECT_EQ(ReadAll("\xEF\xBB\xBFPatient Age,b\r\n1,2\r\n").value(),
            (Records{{"Patient Age", "b"}, {"1", "2"}}));
  EXPECT_EQ(ReadAll("\xEF\xBB\xBF\"q, r\",b\n").value(), (Records{{"q, r", "b"}}));
  EXPECT_EQ(ReadAll("\xEF\xBBx,b\n").value(), (Records{{"\xEF\xBBx", "b"}}));
  EXPECT_EQ(ReadAll("\xEF\xBB\xBF").value(), Records{});
  // Only at the start of the stream: a second one is data.
  EXPECT_EQ(ReadAll("a\n\xEF\xBB\xBF\n").value(), (Records{{"a"}, {"\xEF\xBB\xBF"}}));
}

TEST(CsvRecordReaderTest, UnterminatedQuoteIsAnError) {
  auto result = ReadAll("a,b\n\"c,d\nmore\n");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().message(), "line 2: unterminated quoted field at end of input");
}

TEST(CsvRecordReaderTest, OverLongRecordIsAnError) {
  CsvOptions options;
  options.max_record_bytes = 16;
  EXPECT_TRUE(ReadAll("0123456789,abcd\n", options).ok());  // 15 bytes + newline
  auto result = ReadAll("ok\n0123456789,0123456789\n", options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().message(), "line 2: record longer than 16 bytes");
  // Also inside an unterminated quote (a garbage file cannot exhaust memory).
  EXPECT_FALSE(ReadAll("\"" + std::string(100, 'x'), options).ok());
}

Schema TestSchema() {
  Schema::Builder builder;
  builder.AddNumeric("age", 17, 90, true)
      .AddCategorical("city", {"Paris", "New York, NY", "Say \"Hi\""}, true)
      .AddNumeric("score", 0, 1)
      .AddCategorical("y", {"no", "yes"})
      .AddAlias("y", "yes.", "yes")
      .SetLabel("y");
  return builder.Build().value();
}

class CsvFileTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = ::testing::TempDir() + "/dpc_csv_test_" + name;
    std::ofstream out(path, std::ios::binary);
    out << text;
    paths_.push_back(path);
    return path;
  }
  void TearDown() override {
    for (const auto& p : paths_) std::remove(p.c_str());
  }
  std::vector<std::string> paths_;
};

TEST_F(CsvFileTest, HeaderMapsColumnsByNameIgnoringExtrasAndOrder) {
  const Schema schema = TestSchema();
  const std::string path = Write("reordered.csv",
                                 "id, y ,score,extra,city,age\r\n"
                                 "1,no,0.5,zzz,Paris,30\r\n"
                                 "\r\n"
                                 "2,yes.,1.5,zzz,\"New York, NY\",100\r\n"
                                 "3, yes ,-1,,?,17\r\n");
  auto table = ReadCsvFile(schema, path).value();
  ASSERT_EQ(table.num_rows(), 3);
  Eigen::MatrixXd expected(3, 4);
  expected << 30, 0, 0.5, 0,  //
      90, 1, 1, 1,            //
      17, 3, 0, 1;
  EXPECT_EQ(table.cells, expected);
  EXPECT_EQ(table.clamped_cells, 3);  // 1.5 -> 1, 100 -> 90, -1 -> 0
}

TEST_F(CsvFileTest, MissingOrDuplicateColumnIsAnError) {
  const Schema schema = TestSchema();
  auto missing = ReadCsvFile(schema, Write("missing.csv", "age,city,y\n30,Paris,no\n"));
  EXPECT_EQ(missing.status().message(),
            ::testing::TempDir() + "/dpc_csv_test_missing.csv: header has no column 'score' "
            "(the schema declares it; the header must name every schema column). The header "
            "read has 3 fields: 'age', 'city', 'y'");
  auto twice = ReadCsvFile(schema, Write("twice.csv", "age,city,score,y,age\n"));
  EXPECT_NE(twice.status().message().find("header names column 'age' twice"), std::string::npos);
}

// A file with a byte order mark maps its first column by name; a missing
// column's error shows the header as read, so a wrong delimiter shows.
TEST_F(CsvFileTest, ByteOrderMarkAndHeaderAsRead) {
  const Schema schema = TestSchema();
  auto table = ReadCsvFile(schema, Write("bom.csv", "\xEF\xBB\xBF" "age,city,score,y\r\n"
                                                    "30,Paris,0.5,no\r\n"));
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->num_rows(), 1);
  auto semicolons = ReadCsvFile(schema, Write("semi.csv", "age;city;score;y\n30;Paris;0.5;no\n"));
  ASSERT_FALSE(semicolons.ok());
  EXPECT_NE(semicolons.status().message().find("The header read has 1 field: 'age;city;score;y'"),
            std::string::npos)
      << semicolons.status();
}

TEST_F(CsvFileTest, ErrorsNameFileAndLine) {
  const Schema schema = TestSchema();
  const std::string path = Write("bad.csv", "age,city,score,y\n30,Paris,0.5,no\n\n31,Rome,0.5,no\n");
  auto bad = ReadCsvFile(schema, path);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            path + ":4: Column 'city': 'Rome' is not a declared category (declare it in the "
                   "schema; categories are never learned from rows)");
  auto short_row = ReadCsvFile(schema, Write("short.csv", "age,city,score,y\n30,Paris\n"));
  EXPECT_NE(short_row.status().message().find(":2: row has 2 fields"), std::string::npos);
  auto quote = ReadCsvFile(schema, Write("quote.csv", "age,city,score,y\n30,\"Paris,0.5,no\n"));
  EXPECT_NE(quote.status().message().find("line 2: unterminated quoted field"), std::string::npos);
  EXPECT_EQ(ReadCsvFile(schema, Write("empty.csv", "")).status().message(),
            ::testing::TempDir() + "/dpc_csv_test_empty.csv: empty file");
  EXPECT_EQ(ReadCsvFile(schema, "/nonexistent/dir/x.csv").status().code(),
            absl::StatusCode::kNotFound);
  CsvOptions small;
  small.max_record_bytes = 20;
  auto long_record = ReadCsvFile(
      schema, Write("long.csv", "age,city,score,y\n30,Paris,0.5,no\n30,Paris,0.555555555555,no\n"),
      small);
  EXPECT_NE(long_record.status().message().find("line 3: record longer than 20 bytes"),
            std::string::npos);
}

TEST_F(CsvFileTest, NoHeaderTakesSchemaOrder) {
  const Schema schema = TestSchema();
  CsvOptions options;
  options.has_header = false;
  auto table = ReadCsvFile(schema, Write("noheader.csv", "30,Paris,0.25,no\n40,,0.75,yes\n"), options)
                   .value();
  Eigen::MatrixXd expected(2, 4);
  expected << 30, 0, 0.25, 0,  //
      40, 3, 0.75, 1;
  EXPECT_EQ(table.cells, expected);
}

TEST_F(CsvFileTest, WriteThenReadRoundTrips) {
  const Schema schema = TestSchema();
  Table table;
  table.cells.resize(4, 4);
  table.cells << 17, 0, 0, 0,  //
      90, 1, 1, 1,             //
      45, 2, 0.123456, 0,      //
      50, 3, 0.5, 1;
  std::ostringstream out;
  WriteCsv(schema, table, &out);
  EXPECT_EQ(out.str(),
            "age,city,score,y\n17,Paris,0,no\n90,\"New York, NY\",1,yes\n"
            "45,\"Say \"\"Hi\"\"\",0.123456,no\n50,,0.5,yes\n");
  auto back = ReadCsvFile(schema, Write("roundtrip.csv", out.str())).value();
  EXPECT_EQ(back.cells, table.cells);
  EXPECT_EQ(back.clamped_cells, 0);
}

// ReadCsv as it was (the oracle's records through TableBuilder), for the
// table reader's cell memo and chunks.
absl::StatusOr<Table> ReferenceReadCsv(const Schema& schema, const std::string& text) {
  std::istringstream input(text);
  ReferenceRecordReader reader(&input, CsvOptions{});
  std::vector<std::string> fields;
  auto has = reader.Next(&fields);
  if (!has.ok() || !*has) return absl::InvalidArgumentError("no header");
  auto mapping = MapHeader(schema, fields);
  if (!mapping.ok()) return mapping.status();
  const size_t expected_fields = fields.size();
  TableBuilder builder(schema);
  std::vector<std::string> ordered(schema.num_columns());
  while (true) {
    has = reader.Next(&fields);
    if (!has.ok()) return absl::InvalidArgumentError(absl::StrCat("src: ", has.status().message()));
    if (!*has) break;
    if (fields.size() != expected_fields) {
      return absl::InvalidArgumentError(absl::StrCat(
          "src:", reader.line_number(), ": row has ", fields.size(), " fields, expected ",
          expected_fields, " (as many as the header)",
          "; quote fields that contain the delimiter"));
    }
    for (int c = 0; c < schema.num_columns(); ++c) ordered[c] = fields[(*mapping)[c]];
    absl::Status status = builder.AddRow(ordered);
    if (!status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("src:", reader.line_number(), ": ", status.message()));
    }
  }
  return builder.Finish();
}

// Random files of valid and invalid cells (aliases, missing tokens,
// surrounding whitespace, quoting, clamping): ReadCsv, and the table reader
// in chunks of 1 to 7 rows, give the oracle's table (cells and clamp count)
// or its error, word for word.
TEST(CsvTableReaderTest, ChunksAndMemoReadAsTheRowReader) {
  const Schema schema = TestSchema();
  std::mt19937_64 random(7);
  const std::vector<std::string> ages = {"30", " 30", "30 ", "17", "100", "-5", "2.5e1", "x", "",
                                         "1e999", "+4", "0x10", "nan"};
  const std::vector<std::string> cities = {"Paris", " Paris ", "\"New York, NY\"",
                                           "\"Say \"\"Hi\"\"\"", "", "?", "paris", "Lyon"};
  const std::vector<std::string> scores = {"0.5", "1.5", "-1", ".25", "1e-3", "abc", " 0.75"};
  const std::vector<std::string> labels = {"no", "yes", "yes.", " yes ", "maybe", ""};
  int tables = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string text = "age,city,score,y\n";
    const int rows = static_cast<int>(random() % 12);
    for (int r = 0; r < rows; ++r) {
      // Mostly valid cells, so that most files get past a few rows.
      const bool wild = random() % 8 == 0;
      auto pick = [&](const std::vector<std::string>& options, int valid) {
        return options[random() % (wild ? options.size() : static_cast<size_t>(valid))];
      };
      text += absl::StrCat(pick(ages, 5), ",", pick(cities, 4), ",", pick(scores, 5), ",",
                           pick(labels, 4), random() % 20 == 0 ? ",extra" : "", "\n");
    }
    const absl::StatusOr<Table> expected = ReferenceReadCsv(schema, text);
    std::istringstream input(text);
    const absl::StatusOr<Table> whole = ReadCsv(schema, &input, CsvOptions{}, "src");
    ASSERT_EQ(whole.ok(), expected.ok()) << text << whole.status() << expected.status();
    if (!expected.ok()) {
      EXPECT_EQ(whole.status().message(), expected.status().message()) << text;
      continue;
    }
    ++tables;
    EXPECT_EQ(whole->cells, expected->cells) << text;
    EXPECT_EQ(whole->clamped_cells, expected->clamped_cells) << text;
    std::istringstream again(text);
    auto reader = CsvTableReader::Open(schema, &again, CsvOptions{}, "src").value();
    const int64_t chunk_rows = 1 + static_cast<int64_t>(random() % 7);
    Eigen::MatrixXd cells(0, schema.num_columns());
    int64_t clamped = 0;
    Table chunk;
    while (reader->Next(chunk_rows, &chunk).value()) {
      ASSERT_LE(chunk.num_rows(), chunk_rows);
      Eigen::MatrixXd grown(cells.rows() + chunk.num_rows(), cells.cols());
      grown << cells, chunk.cells;
      cells = grown;
      clamped += chunk.clamped_cells;
    }
    EXPECT_EQ(cells, expected->cells) << text;
    EXPECT_EQ(clamped, expected->clamped_cells) << text;
  }
  EXPECT_GT(tables, 500);  // the comparison of cells ran, not only of errors
}

// drop_malformed_records (issue 37 item 3; the scale-out partials): a row
// the upload would refuse is dropped and counted, and the rows around it are
// read as before. Oracle: each line read alone under the header by the
// row reader; the kept rows are those it accepts, in order, and the dropped
// lines those it refuses. A dropped row's clamped cells are not counted.
TEST(CsvTableReaderTest, DroppedRowsAreTheRowsTheUploadRefuses) {
  const Schema schema = TestSchema();
  std::mt19937_64 random(37);
  const std::vector<std::string> ages = {"30", "100", "-5", "x", "", "1e999", "nan", "inf"};
  const std::vector<std::string> cities = {"Paris", "\"New York, NY\"", "?", "Lyon"};
  const std::vector<std::string> scores = {"0.5", "1.5", "abc"};
  const std::vector<std::string> labels = {"no", "yes.", "maybe"};
  int dropped_total = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const std::string header = "age,city,score,y\n";
    std::vector<std::string> lines;
    const int rows = static_cast<int>(random() % 30);
    for (int r = 0; r < rows; ++r) {
      const bool wild = random() % 4 == 0;
      auto pick = [&](const std::vector<std::string>& options, int valid) {
        return options[random() % (wild ? options.size() : static_cast<size_t>(valid))];
      };
      lines.push_back(absl::StrCat(pick(ages, 3), ",", pick(cities, 3), ",", pick(scores, 2),
                                   ",", pick(labels, 2), random() % 30 == 0 ? ",extra" : ""));
    }
    Eigen::MatrixXd expected(0, schema.num_columns());
    int64_t expected_clamped = 0;
    std::vector<int64_t> expected_lines;
    std::string text = header;
    for (size_t r = 0; r < lines.size(); ++r) {
      text += lines[r] + "\n";
      const absl::StatusOr<Table> alone = ReferenceReadCsv(schema, header + lines[r] + "\n");
      if (!alone.ok()) {
        expected_lines.push_back(static_cast<int64_t>(r) + 2);  // the header is line 1
        continue;
      }
      Eigen::MatrixXd grown(expected.rows() + 1, expected.cols());
      grown << expected, alone->cells;
      expected = grown;
      expected_clamped += alone->clamped_cells;
    }
    CsvOptions options;
    options.drop_malformed_records = true;
    std::istringstream input(text);
    auto reader = CsvTableReader::Open(schema, &input, options, "src").value();
    const int64_t chunk_rows = 1 + static_cast<int64_t>(random() % 7);
    Eigen::MatrixXd cells(0, schema.num_columns());
    int64_t clamped = 0;
    Table chunk;
    while (true) {
      const absl::StatusOr<bool> more = reader->Next(chunk_rows, &chunk);
      ASSERT_TRUE(more.ok()) << more.status();
      if (!*more) break;
      Eigen::MatrixXd grown(cells.rows() + chunk.num_rows(), cells.cols());
      grown << cells, chunk.cells;
      cells = grown;
      clamped += chunk.clamped_cells;
    }
    EXPECT_EQ(cells, expected) << text;
    EXPECT_EQ(clamped, expected_clamped) << text;
    EXPECT_EQ(reader->malformed_records(), static_cast<int64_t>(expected_lines.size())) << text;
    std::vector<int64_t> example_lines;
    for (const MalformedRecord& record : reader->malformed_examples()) {
      example_lines.push_back(record.line);
      EXPECT_FALSE(record.detail.empty());
    }
    expected_lines.resize(std::min(expected_lines.size(), kMaxMalformedExamples));
    EXPECT_EQ(example_lines, expected_lines) << text;
    dropped_total += static_cast<int>(reader->malformed_records());
  }
  EXPECT_GT(dropped_total, 500);
}

// An unterminated quote on line k of a 40-row shard (issue 37's residue,
// docs/privacy.md 6.5): exactly one malformed record, line k, and the 39
// other rows read as without it, whatever chunk the line falls in. Before
// the line rule the quote took the rest of the shard into one record, so
// the record count depended on the row.
TEST(CsvTableReaderTest, UnterminatedQuoteIsOneMalformedLine) {
  const Schema schema = TestSchema();
  std::vector<std::string> lines;
  for (int r = 0; r < 40; ++r) {
    lines.push_back(absl::StrCat(17 + r, ",", r % 3 == 0 ? "\"New York, NY\"" : "Paris", ",",
                                 (r % 10) / 10.0, ",", r % 2 == 0 ? "no" : "yes"));
  }
  for (const int k : {2, 3, 17, 40, 41}) {  // the header is line 1
    for (const std::string ending : {"\n", "\r\n"}) {
      std::string text = "age,city,score,y" + ending;
      std::string good = "age,city,score,y\n";
      for (int r = 0; r < 40; ++r) {
        if (r + 2 == k) {
          text += absl::StrCat(17 + r, ",\"Paris,0.5,no", ending);
        } else {
          text += lines[static_cast<size_t>(r)] + ending;
          good += lines[static_cast<size_t>(r)] + "\n";
        }
      }
      const Table expected = ReferenceReadCsv(schema, good).value();
      for (const int64_t chunk_rows : {int64_t{1}, int64_t{7}, int64_t{1} << 16}) {
        CsvOptions options;
        options.drop_malformed_records = true;
        std::istringstream input(text);
        auto reader = CsvTableReader::Open(schema, &input, options, "src").value();
        Eigen::MatrixXd cells(0, schema.num_columns());
        Table chunk;
        while (true) {
          const absl::StatusOr<bool> more = reader->Next(chunk_rows, &chunk);
          ASSERT_TRUE(more.ok()) << more.status();
          if (!*more) break;
          Eigen::MatrixXd grown(cells.rows() + chunk.num_rows(), cells.cols());
          grown << cells, chunk.cells;
          cells = grown;
        }
        SCOPED_TRACE(absl::StrCat("line ", k, ", chunk ", chunk_rows, ", ending ",
                                  absl::CEscape(ending)));
        EXPECT_EQ(cells.rows(), 39);
        EXPECT_EQ(cells, expected.cells);
        EXPECT_EQ(reader->malformed_records(), 1);
        ASSERT_EQ(reader->malformed_examples().size(), 1u);
        EXPECT_EQ(reader->malformed_examples()[0].line, k);
      }
    }
  }
}

// Long files: a column of distinct measurements (the memo gives up on it)
// beside columns of few texts (the memo keeps them), with a bad cell late in
// some files, after the memo has given up: the oracle's table or error.
TEST(CsvTableReaderTest, LongFilesReadAsTheRowReader) {
  const Schema schema = TestSchema();
  std::mt19937_64 random(11);
  for (int trial = 0; trial < 12; ++trial) {
    std::string text = "y,score,age,city\n";
    const int rows = 500 + static_cast<int>(random() % 3000);
    const int bad_row = trial % 3 == 0 ? static_cast<int>(random() % rows) : -1;
    for (int r = 0; r < rows; ++r) {
      const std::string score =
          r == bad_row ? "0.5x" : absl::StrCat(static_cast<double>(random() % 2000000) / 1e6 - 0.5);
      text += absl::StrCat(random() % 2 == 0 ? "no" : " yes.", ",", score, ",",
                           17 + random() % 80, ",", random() % 3 == 0 ? "" : "Paris", "\n");
    }
    const absl::StatusOr<Table> expected = ReferenceReadCsv(schema, text);
    ASSERT_EQ(expected.ok(), bad_row < 0) << expected.status();
    for (const int64_t chunk_rows : {int64_t{7}, int64_t{1} << 16}) {
      std::istringstream input(text);
      auto reader = CsvTableReader::Open(schema, &input, CsvOptions{}, "src").value();
      Eigen::MatrixXd cells(0, schema.num_columns());
      int64_t clamped = 0;
      Table chunk;
      absl::StatusOr<bool> more;
      while ((more = reader->Next(chunk_rows, &chunk)).ok() && *more) {
        Eigen::MatrixXd grown(cells.rows() + chunk.num_rows(), cells.cols());
        grown << cells, chunk.cells;
        cells = grown;
        clamped += chunk.clamped_cells;
      }
      if (!expected.ok()) {
        ASSERT_FALSE(more.ok());
        EXPECT_EQ(more.status().message(), expected.status().message());
        continue;
      }
      ASSERT_TRUE(more.ok()) << more.status();
      EXPECT_EQ(cells, expected->cells);
      EXPECT_EQ(clamped, expected->clamped_cells);
    }
  }
}

TEST(TableBuilderTest, RowsAreAllOrNothing) {
  const Schema schema = TestSchema();
  TableBuilder builder(schema);
  ASSERT_TRUE(builder.AddRow({"30", "Paris", "0.5", "no"}).ok());
  EXPECT_EQ(builder.AddRow({"30", "Paris", "0.5"}).message(),
            "row has 3 fields, the schema declares 4");
  EXPECT_FALSE(builder.AddRow({"1000", "Paris", "x", "no"}).ok());  // clamps, then fails
  EXPECT_EQ(builder.num_rows(), 1);
  ASSERT_TRUE(builder.AddRow({"1000", "", "0.5", "yes"}).ok());
  const Table table = builder.Finish();
  EXPECT_EQ(table.num_rows(), 2);
  EXPECT_EQ(table.clamped_cells, 1);  // the failed row's clamp is not counted
  EXPECT_EQ(table.cells(1, 0), 90);
  EXPECT_EQ(builder.num_rows(), 0);  // Finish resets
}

}  // namespace
}  // namespace dpcurator::data
