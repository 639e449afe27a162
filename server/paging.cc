#include "server/paging.h"

#include <google/protobuf/io/coded_stream.h>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace dpcurator::server {
namespace {

// Room kept for the response's other fields (next_page_token: a number and
// a server-made id, under 100 bytes).
constexpr size_t kPageOverheadBytes = 512;

}  // namespace

absl::StatusOr<int> ResolvePageSize(int32_t requested) {
  if (requested < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "page_size must be 0 (the default, ", kDefaultPageSize, ") or positive, got ",
        requested));
  }
  if (requested == 0) return kDefaultPageSize;
  return requested > kMaxPageSize ? kMaxPageSize : static_cast<int>(requested);
}

std::string EncodePageToken(const PageCursor& cursor) {
  // "<created_unix>/<id>": the number never holds a '/', so the first one
  // splits the two whatever the id holds.
  return absl::StrCat(cursor.created_unix, "/", cursor.id);
}

absl::StatusOr<std::optional<PageCursor>> DecodePageToken(absl::string_view token) {
  if (token.empty()) return std::nullopt;
  const size_t slash = token.find('/');
  PageCursor cursor;
  if (slash == absl::string_view::npos ||
      !absl::SimpleAtoi(token.substr(0, slash), &cursor.created_unix) ||
      slash + 1 == token.size()) {
    return absl::InvalidArgumentError(
        "page_token is not one this server made: pass the previous page's next_page_token "
        "unchanged, or none for the first page");
  }
  cursor.id = std::string(token.substr(slash + 1));
  return cursor;
}

namespace {

absl::Status BadPageToken() {
  return absl::InvalidArgumentError(
      "page_token is not one this server made: pass the previous page's next_page_token "
      "unchanged, or none for the first page");
}

}  // namespace

std::string EncodeBudgetPageToken(const BudgetPageCursor& cursor) {
  if (!cursor.sessions) return absl::StrCat("e", cursor.event_id);
  if (!cursor.session.has_value()) return "s";
  return absl::StrCat("s", EncodePageToken(*cursor.session));
}

absl::StatusOr<std::optional<BudgetPageCursor>> DecodeBudgetPageToken(absl::string_view token) {
  if (token.empty()) return std::nullopt;
  BudgetPageCursor cursor;
  const absl::string_view rest = token.substr(1);
  if (token.front() == 'e') {
    if (!absl::SimpleAtoi(rest, &cursor.event_id) || cursor.event_id < 0) return BadPageToken();
    return cursor;
  }
  if (token.front() != 's') return BadPageToken();
  cursor.sessions = true;
  if (rest.empty()) return cursor;
  absl::StatusOr<std::optional<PageCursor>> session = DecodePageToken(rest);
  if (!session.ok()) return BadPageToken();
  cursor.session = **session;
  return cursor;
}

size_t PageBudget::EncodedItemBytes(size_t item_bytes) {
  // One tag byte (the item fields are numbered below 16) and the length.
  return 1 + google::protobuf::io::CodedOutputStream::VarintSize64(item_bytes) + item_bytes;
}

bool PageBudget::Fits(size_t item_bytes) const {
  if (items_ == 0) return true;  // progress: every page holds an item
  if (items_ >= page_size_) return false;
  return bytes_ + EncodedItemBytes(item_bytes) + kPageOverheadBytes <= max_bytes_;
}

void PageBudget::Add(size_t item_bytes) {
  ++items_;
  bytes_ += EncodedItemBytes(item_bytes);
}

}  // namespace dpcurator::server
