// List calls paged by bytes as well as rows (issue 24, item 2): whatever
// the number of items and however long their (input-limited) caller
// strings, every page stays under the byte budget (server/paging.h), and a
// client that follows the page tokens gets every item exactly once, in
// order.

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/connection.h"
#include "server/input_limits.h"
#include "server/paging.h"
#include "tests/server/server_test_util.h"

namespace dpcurator::server::testing {
namespace {

// A caller string of exactly the input limit, distinct per `i`.
std::string Longest(const std::string& prefix, int i) {
  std::string text = absl::StrCat(prefix, i, "-");
  text.resize(static_cast<size_t>(kMaxCallerStringBytes), 'x');
  return text;
}

std::vector<std::string> Sorted(std::vector<std::string> ids) {
  std::sort(ids.begin(), ids.end());
  return ids;
}

class PagingTest : public ServerTest {};

// 40 datasets of ~50 KiB each (a 200-byte name, the most CreateDataset
// takes, and 200 categories of 256 bytes): about 2 MiB in all, which one
// response used to carry whole (past the 1 MiB budget, and at 80 of them
// past gRPC's 4 MiB default).
TEST_F(PagingTest, ManyLargeDatasetsListCompletelyInPagesUnderTheBudget) {
  constexpr int kDatasets = 40;
  std::vector<std::string> created;
  client::Connection curator = Curator();
  for (int d = 0; d < kDatasets; ++d) {
    v1::CreateDatasetRequest request;
    request.set_name(Longest("name", d).substr(0, 200));
    v1::ColumnSchema& wide = *request.mutable_schema()->add_columns();
    wide.set_name("wide");
    wide.set_type(v1::ColumnSchema::CATEGORICAL);
    for (int c = 0; c < 200; ++c) wide.add_categories(Longest(absl::StrCat("d", d, "c"), c));
    v1::ColumnSchema& x = *request.mutable_schema()->add_columns();
    x.set_name("x");
    x.set_type(v1::ColumnSchema::NUMERIC);
    x.set_upper(1.0);
    request.mutable_budget()->set_epsilon(1.0);
    request.mutable_budget()->set_delta(1e-5);
    v1::Dataset dataset;
    auto context = curator.NewContext();
    grpc::Status status = curator.datasets().CreateDataset(context.get(), request, &dataset);
    ASSERT_TRUE(status.ok()) << status.error_message();
    created.push_back(dataset.id());
  }
  for (client::Connection connection : {Curator(), Analyst()}) {
    std::vector<std::string> listed;
    std::string token;
    int pages = 0;
    do {
      v1::ListDatasetsRequest request;
      request.set_page_size(kMaxPageSize);  // the rows allow all; the bytes do not
      request.set_page_token(token);
      v1::ListDatasetsResponse page;
      auto context = connection.NewContext();
      grpc::Status status = connection.datasets().ListDatasets(context.get(), request, &page);
      ASSERT_TRUE(status.ok()) << status.error_message();
      ++pages;
      ASSERT_LE(pages, kDatasets) << "paging does not end";
      EXPECT_GT(page.datasets_size(), 0);
      EXPECT_LE(page.ByteSizeLong(), kMaxPageBytes);
      for (const auto& dataset : page.datasets()) listed.push_back(dataset.id());
      token = page.next_page_token();
    } while (!token.empty());
    EXPECT_GE(pages, 2);
    // Every dataset once (pages are in (created_unix, id) order, so ids
    // made in the same second come sorted, not in creation order).
    EXPECT_EQ(Sorted(listed), Sorted(created));
    // The client's loop (`datasets list`, FindDataset) gets them all too.
    auto all = client::ListAllDatasets(&connection);
    ASSERT_TRUE(all.ok()) << all.status();
    ASSERT_EQ(all->size(), created.size());
    auto last = client::FindDataset(&connection, created.back());
    ASSERT_TRUE(last.ok()) << last.status();
  }
}

// Rows bound a page too, and a token survives items created meanwhile.
TEST_F(PagingTest, ReleasesPageByRowsAndByBytesWithEveryReleaseOnce) {
  v1::Dataset dataset;
  ASSERT_TRUE(CreateDataset(1000.0, 1e-5, v1::ADD_REMOVE, &dataset).ok());
  ASSERT_TRUE(UploadDemoRows(dataset.id(), 60, 3).ok());
  constexpr int kReleases = 24;
  std::vector<std::string> created;
  for (int r = 0; r < kReleases; ++r) {
    v1::Release release;
    grpc::Status status = RequestRelease(RffRequest(dataset.id(), 1.0, Longest("key", r)),
                                         &release);
    ASSERT_TRUE(status.ok()) << status.error_message();
    created.push_back(release.id());
  }
  // By rows, over the RPC: pages of 5.
  client::Connection analyst = Analyst();
  std::vector<std::string> listed;
  std::string token;
  int pages = 0;
  do {
    v1::ListReleasesRequest request;
    request.set_dataset_id(dataset.id());
    request.set_page_size(5);
    request.set_page_token(token);
    v1::ListReleasesResponse page;
    auto context = analyst.NewContext();
    grpc::Status status = analyst.releases().ListReleases(context.get(), request, &page);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_LE(++pages, kReleases);
    EXPECT_LE(page.releases_size(), 5);
    for (const auto& release : page.releases()) {
      EXPECT_EQ(release.idempotency_key().size(), static_cast<size_t>(kMaxCallerStringBytes));
      listed.push_back(release.id());
    }
    token = page.next_page_token();
  } while (!token.empty());
  EXPECT_EQ(pages, (kReleases + 4) / 5);
  EXPECT_EQ(Sorted(listed), Sorted(created));
  auto all = client::ListAllReleases(&analyst, dataset.id());
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), created.size());

  // By bytes, through the ledger with a 2 KiB budget (each summary of a
  // 256-byte key is about 330 bytes): several pages, each under it.
  auto opened = OpenDatabase(db_path_);
  ASSERT_TRUE(opened.ok()) << opened.status();
  constexpr size_t kBudget = 2048;
  listed.clear();
  pages = 0;
  PageRequest page_request;
  page_request.page_size = kMaxPageSize;
  page_request.max_bytes = kBudget;
  do {
    auto page = opened->ledger->ListReleases(dataset.id(), Caller::Curator(), page_request);
    ASSERT_TRUE(page.ok()) << page.status();
    ASSERT_LE(++pages, kReleases);
    EXPECT_LE(page->ByteSizeLong(), kBudget);
    for (const auto& release : page->releases()) listed.push_back(release.id());
    page_request.page_token = page->next_page_token();
  } while (!page_request.page_token.empty());
  EXPECT_GE(pages, 4);
  EXPECT_EQ(Sorted(listed), Sorted(created));

  // A malformed token is refused, not read as the first page.
  v1::ListReleasesRequest bad;
  bad.set_dataset_id(dataset.id());
  bad.set_page_token("not-a-token");
  v1::ListReleasesResponse ignored;
  auto context = analyst.NewContext();
  EXPECT_EQ(analyst.releases().ListReleases(context.get(), bad, &ignored).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

// The audit log: each refused call with a 256-byte target writes a row of
// about 330 bytes; `admin audit --limit 10000` used to be one response of
// them all. Pages stop at the budget and next_before_id goes on from there.
TEST_F(PagingTest, AuditPagesByBytesAndTheClientCollectsItsLimit) {
  constexpr int kCalls = 30;
  for (int i = 0; i < kCalls; ++i) {
    v1::BudgetReport report;
    EXPECT_EQ(GetBudget(Longest("missing", i), &report).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  auto opened = OpenDatabase(db_path_);
  ASSERT_TRUE(opened.ok()) << opened.status();
  constexpr size_t kBudget = 2048;
  std::vector<int64_t> ids;
  int64_t before_id = 0;
  int pages = 0;
  do {
    auto page = opened->store->ListAudit(10000, before_id, kBudget);
    ASSERT_TRUE(page.ok()) << page.status();
    ASSERT_LE(++pages, 1000);
    EXPECT_LE(page->ByteSizeLong(), kBudget);
    for (const auto& record : page->records()) ids.push_back(record.id());
    before_id = page->next_before_id();
  } while (before_id != 0);
  EXPECT_GE(pages, 4);
  ASSERT_GE(ids.size(), static_cast<size_t>(kCalls));
  for (size_t i = 1; i < ids.size(); ++i) EXPECT_EQ(ids[i], ids[i - 1] - 1);  // none skipped

  // The row limit: next_before_id says more follow; the client's loop
  // collects exactly its limit, newest first.
  v1::ListAuditResponse first;
  ASSERT_TRUE(ListAudit(5, &first).ok());
  ASSERT_EQ(first.records_size(), 5);
  EXPECT_EQ(first.next_before_id(), first.records(4).id());
  client::Connection curator = Curator();
  auto newest = client::ListNewestAudit(&curator, 12);
  ASSERT_TRUE(newest.ok()) << newest.status();
  ASSERT_EQ(newest->size(), 12u);
  for (size_t i = 1; i < newest->size(); ++i) {
    EXPECT_LT((*newest)[i].id(), (*newest)[i - 1].id());
  }
  // All of it: the page ends with no next_before_id.
  auto everything = client::ListNewestAudit(&curator, 10000);
  ASSERT_TRUE(everything.ok()) << everything.status();
  EXPECT_GE(everything->size(), static_cast<size_t>(kCalls));
}

TEST(PageBudgetTest, AFirstItemAlwaysFitsAndRowsAndBytesBothBound) {
  PageBudget rows(2, 1 << 20);
  EXPECT_TRUE(rows.Fits(100));
  rows.Add(100);
  EXPECT_TRUE(rows.Fits(100));
  rows.Add(100);
  EXPECT_FALSE(rows.Fits(1));  // page_size reached
  PageBudget bytes(1000, 4096);
  EXPECT_TRUE(bytes.Fits(10000));  // alone on its page: progress
  bytes.Add(10000);
  EXPECT_FALSE(bytes.Fits(1));
  PageBudget small(1000, 4096);
  small.Add(1000);
  EXPECT_TRUE(small.Fits(1000));
  small.Add(1000);
  EXPECT_FALSE(small.Fits(3000));
  EXPECT_FALSE(ResolvePageSize(-1).ok());
  EXPECT_EQ(*ResolvePageSize(0), kDefaultPageSize);
  EXPECT_EQ(*ResolvePageSize(kMaxPageSize + 1), kMaxPageSize);
  auto cursor = DecodePageToken(EncodePageToken({123, "file:ab/cd"}));
  ASSERT_TRUE(cursor.ok() && cursor->has_value());
  EXPECT_EQ((*cursor)->created_unix, 123);
  EXPECT_EQ((*cursor)->id, "file:ab/cd");
  EXPECT_FALSE(DecodePageToken("x/y").ok());
  EXPECT_FALSE(DecodePageToken("12/").ok());
}

}  // namespace
}  // namespace dpcurator::server::testing
