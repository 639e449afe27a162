#ifndef DPCURATOR_SERVER_PAGING_H_
#define DPCURATOR_SERVER_PAGING_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dpcurator::server {

// List calls page by rows AND by bytes (issue 24, item 2): a page holds at
// most page_size items and stops before its serialized size would pass
// kMaxPageBytes, so a page fits gRPC's 4 MiB default receive limit however
// many items there are and however long their (input-limited, 256-byte)
// caller strings. The rest comes with the next page's token, so a client
// that follows next_page_token gets every item exactly once.
//
// A page always holds at least one item, so paging makes progress: an
// item larger than the budget (a dataset whose declared schema has several
// MiB of categories) comes alone on its page.
inline constexpr int kDefaultPageSize = 100;
inline constexpr int kMaxPageSize = 1000;
inline constexpr size_t kMaxPageBytes = size_t{1} << 20;

// 0 -> kDefaultPageSize; above kMaxPageSize -> kMaxPageSize; negative is
// INVALID_ARGUMENT.
absl::StatusOr<int> ResolvePageSize(int32_t requested);

// Keyset pages: items are listed in (created_unix, id) order and a page
// token names the last item of the previous page, so items created while
// a client pages never shift a page (no offsets). The token is opaque to
// clients; a malformed one is INVALID_ARGUMENT. Forging one only moves the
// start of the listing: every item on a page is still filtered by what the
// caller may see.
struct PageCursor {
  int64_t created_unix = 0;
  std::string id;
};
std::string EncodePageToken(const PageCursor& cursor);
// nullopt for the empty token (the first page).
absl::StatusOr<std::optional<PageCursor>> DecodePageToken(absl::string_view token);

// GetBudget's token: the report pages two lists under one budget, the
// ledger's events (by id) and then the sessions (by created_unix, id). The
// token names the list and the last item of the previous page:
// "e<event id>", "s" (sessions from the first) or "s<created_unix>/<id>".
struct BudgetPageCursor {
  bool sessions = false;  // false: events after event_id, then sessions
  int64_t event_id = 0;
  std::optional<PageCursor> session;  // sessions after it; nullopt: from the first
};
std::string EncodeBudgetPageToken(const BudgetPageCursor& cursor);
// nullopt for the empty token (the first page); INVALID_ARGUMENT for a
// token this server did not make.
absl::StatusOr<std::optional<BudgetPageCursor>> DecodeBudgetPageToken(absl::string_view token);

// One page's request as the store and ledger take it: the wire's page_size
// and page_token, and the byte budget (tests lower it to page with few
// items).
struct PageRequest {
  int32_t page_size = 0;
  std::string page_token;
  size_t max_bytes = kMaxPageBytes;
};

// The running size of one page: whether the next item still fits.
class PageBudget {
 public:
  explicit PageBudget(int page_size, size_t max_bytes = kMaxPageBytes)
      : page_size_(page_size), max_bytes_(max_bytes) {}
  // Whether an item whose message serializes to `item_bytes` may join the
  // page: fewer than page_size items so far and the page's bytes with it
  // (the repeated field's tag and length prefix included) within
  // max_bytes, or the page is still empty.
  bool Fits(size_t item_bytes) const;
  void Add(size_t item_bytes);
  int items() const { return items_; }
  size_t bytes() const { return bytes_; }

  // The bytes an item adds to its response: tag, length prefix, message.
  static size_t EncodedItemBytes(size_t item_bytes);

 private:
  const int page_size_;
  const size_t max_bytes_;
  int items_ = 0;
  size_t bytes_ = 0;
};

}  // namespace dpcurator::server

#endif  // DPCURATOR_SERVER_PAGING_H_
