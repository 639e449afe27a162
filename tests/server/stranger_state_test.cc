// Strangers leave O(1) state (issue 36, items 1 and 2): 100,000 calls
// without a valid token, with paths the server never declared, change
// neither the number of metric series nor, beyond fixed bounds, the
// process's memory or the database's size.
//
// Uses only what the server offered before issue 36 (the in-process
// fixture, Metrics::Scrape, the database handle), so that the same file
// can be built against that server and shown to fail there.
//
// The calls go through async generic stubs, several channels and threads
// with a window of calls in flight each: 100,000 calls take seconds.

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "tests/server/server_test_util.h"

namespace dpcurator::server::testing {
namespace {

constexpr int64_t kCalls = 100000;
// Checked after every chunk, so that a leak fails fast instead of eating
// the machine (before issue 36: ~9 kB of RSS, or ~14 kB of disk, a call).
constexpr int64_t kChunk = 5000;
constexpr int kThreads = 4;
constexpr int kWindow = 32;  // calls in flight per thread
// Long paths: over HPACK's 4,096-byte table, so that the client sends each
// as a plain literal (Flood says why that matters), and under gRPC's 8 KiB
// metadata limit, so that each reaches the server's interceptors.
constexpr size_t kLongPathBytes = 5000;

// A pseudo-random 64-bit value of `i` (splitmix64): paths that differ on
// every call, reproducibly, with no shared generator between threads.
uint64_t Mix(uint64_t i) {
  uint64_t z = i + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

std::string Hex(uint64_t value) { return absl::StrFormat("%016x", value); }

using PathOf = std::function<std::string(int64_t)>;

// Unary calls with an empty body to paths [begin, end) of `path`, spread
// over `channels` (one thread each), with `authorization` as metadata
// (empty: none). Returns how many calls ended with each status code.
std::map<grpc::StatusCode, int64_t> Flood(const std::string& address, int64_t begin,
                                          int64_t end, const PathOf& path,
                                          const std::string& authorization) {
  // Fresh channels for each flood: gRPC 1.51's client HPACK encoder keeps
  // every :path it sent on a connection in a list that it prunes only on a
  // repeat (hpack_encoder.cc, SliceIndex), so a channel that sends 100,000
  // distinct paths grows by ~250 bytes a call and scans that list on each:
  // the CLIENT's cost (an attacker's), which would blur what this test
  // measures, the server's.
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < kThreads; ++i) {
    // Distinct arguments: a connection per thread, not one shared.
    grpc::ChannelArguments arguments;
    arguments.SetInt("dpc.stranger_channel", i);
    channels.push_back(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), arguments));
  }
  std::mutex mutex;
  std::map<grpc::StatusCode, int64_t> codes;
  std::vector<std::thread> threads;
  const int64_t per_thread = (end - begin + kThreads - 1) / kThreads;
  for (int t = 0; t < kThreads; ++t) {
    const int64_t first = begin + t * per_thread;
    const int64_t last = std::min(end, first + per_thread);
    threads.emplace_back([&, t, first, last] {
      struct Call {
        grpc::ClientContext context;
        grpc::ByteBuffer response;
        grpc::Status status;
        std::unique_ptr<grpc::GenericClientAsyncResponseReader> reader;
      };
      grpc::GenericStub stub(channels[static_cast<size_t>(t) % channels.size()]);
      grpc::CompletionQueue queue;
      grpc::Slice empty("");
      const grpc::ByteBuffer request(&empty, 1);
      std::map<grpc::StatusCode, int64_t> local;
      int64_t next = first;
      int in_flight = 0;
      const auto start = [&] {
        auto* call = new Call;
        call->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
        if (!authorization.empty()) call->context.AddMetadata("authorization", authorization);
        call->reader = stub.PrepareUnaryCall(&call->context, path(next++), request, &queue);
        call->reader->StartCall();
        call->reader->Finish(&call->response, &call->status, call);
        ++in_flight;
      };
      while (next < last && in_flight < kWindow) start();
      void* tag = nullptr;
      bool ok = false;
      while (in_flight > 0 && queue.Next(&tag, &ok)) {
        auto* call = static_cast<Call*>(tag);
        ++local[call->status.error_code()];
        delete call;
        --in_flight;
        if (next < last) start();
      }
      queue.Shutdown();
      while (queue.Next(&tag, &ok)) {
      }
      std::lock_guard<std::mutex> lock(mutex);
      for (const auto& [code, count] : local) codes[code] += count;
    });
  }
  for (auto& thread : threads) thread.join();
  return codes;
}

int64_t Sum(const std::map<grpc::StatusCode, int64_t>& codes) {
  int64_t total = 0;
  for (const auto& [code, count] : codes) total += count;
  return total;
}

// Resident set size of this process (server and clients), in bytes, after
// handing freed heap pages back (malloc_trim): what is live, not what
// glibc's arenas happen to keep cached from the last burst of calls.
int64_t RssBytes() {
  malloc_trim(0);
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0;
  int64_t resident = 0;
  statm >> size >> resident;
  return resident * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

// Sample lines of the exposition (one per series and bucket), comments out.
int64_t SeriesLines(const std::string& scrape) {
  int64_t lines = 0;
  for (absl::string_view line : absl::StrSplit(scrape, '\n', absl::SkipEmpty())) {
    if (line[0] != '#') ++lines;
  }
  return lines;
}

class StrangerStateTest : public ServerTest {
 protected:
  int64_t DatabaseBytes() const { return FileBytes(db_path_) + FileBytes(db_path_ + "-wal"); }
  int64_t AuditRows() {
    auto db = server_->database()->Lock();
    auto query = db->Prepare("SELECT COUNT(*) FROM audit_log");
    EXPECT_TRUE(query.ok()) << query.status();
    if (!query.ok()) return -1;
    auto row = query->Step();
    return row.ok() && *row ? query->ColumnInt(0) : -1;
  }
};

// Item 1: paths under /grpc.health.v1.Health/ and elsewhere, no token.
// Before issue 36 every health-prefixed path was a public method and a new
// pair of series (a counter and a 15-bucket histogram), never freed:
// 100,000 calls added 200,000 series and about 900 MB.
TEST_F(StrangerStateTest, RandomMethodPathsLeaveFixedSeriesAndBoundedMemory) {
  const PathOf path = [](int64_t i) {
    const std::string noise = Hex(Mix(static_cast<uint64_t>(i)));
    switch (i % 4) {
      case 0:
        return absl::StrCat("/grpc.health.v1.Health/", noise);
      case 1:
        return absl::StrCat("/dpcurator.v1.ReleaseService/", noise);
      case 2:
        // An undeclared service of the server's own package: a name
        // lookup there must not remember the name (protobuf's pool keeps
        // every symbol its fallback database lacks).
        return absl::StrCat("/dpcurator.v1.S", noise, "/", noise);
      default:
        return absl::StrCat("/", noise, ".Service/", noise);
    }
  };
  // Warm-up: every series these calls can make exists, every thread and
  // arena gRPC keeps is there.
  constexpr int64_t kWarmUp = 10000;
  EXPECT_EQ(Sum(Flood(address(), kCalls, kCalls + kWarmUp, path, "")), kWarmUp);
  const int64_t series = SeriesLines(server_->metrics()->Scrape());
  const int64_t rss = RssBytes();
  const auto started = std::chrono::steady_clock::now();
  std::map<grpc::StatusCode, int64_t> codes;
  for (int64_t begin = 0; begin < kCalls; begin += kChunk) {
    for (const auto& [code, count] : Flood(address(), begin, begin + kChunk, path, "")) {
      codes[code] += count;
    }
    ASSERT_EQ(SeriesLines(server_->metrics()->Scrape()), series) << "after " << begin + kChunk;
    ASSERT_LT(RssBytes() - rss, int64_t{8} << 20) << "after " << begin + kChunk << " calls";
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_EQ(Sum(codes), kCalls);
  // None of these paths is a method: without a token, each is refused
  // before gRPC could answer UNIMPLEMENTED.
  EXPECT_EQ(codes[grpc::StatusCode::UNAUTHENTICATED], kCalls);
  const std::string scrape = server_->metrics()->Scrape();
  EXPECT_NE(scrape.find("method=\"unknown\""), std::string::npos);
  EXPECT_EQ(scrape.find("Health/0"), std::string::npos);
  std::printf("%lld calls in %.1f s; RSS %+.1f MB; %lld series lines\n",
              static_cast<long long>(kCalls), seconds,
              static_cast<double>(RssBytes() - rss) / (1 << 20),
              static_cast<long long>(series));
}

// Item 2: a bad token and long paths. Before issue 36 each call wrote a
// synced audit row holding its path uncut: ~14 kB of database and WAL a
// call. Now one row per (peer, method, code) per interval, whose method is
// "unknown"; the fake clock keeps the whole flood in one interval.
TEST_F(StrangerStateTest, BadTokenFloodWithLongPathsKeepsTheDatabaseBounded) {
  StopServer();
  clock_ = &fake_clock_;
  StartServer();
  const PathOf path = [](int64_t i) {
    std::string noise;
    for (uint64_t k = 0; noise.size() < kLongPathBytes; ++k) {
      absl::StrAppend(&noise, Hex(Mix(static_cast<uint64_t>(i) * 1000 + k)));
    }
    return absl::StrCat(i % 2 == 0 ? "/dpcurator.v1.AdminService/" : "/grpc.health.v1.Health/",
                        noise);
  };
  const std::string bad = absl::StrCat("Bearer ", kUnknownToken);
  constexpr int64_t kWarmUp = 1000;
  EXPECT_EQ(Sum(Flood(address(), kCalls, kCalls + kWarmUp, path, bad)), kWarmUp);
  const int64_t bytes = DatabaseBytes();
  const int64_t rows = AuditRows();
  std::map<grpc::StatusCode, int64_t> codes;
  for (int64_t begin = 0; begin < kCalls; begin += kChunk) {
    for (const auto& [code, count] : Flood(address(), begin, begin + kChunk, path, bad)) {
      codes[code] += count;
    }
    ASSERT_LT(DatabaseBytes() - bytes, int64_t{1} << 20) << "after " << begin + kChunk;
    ASSERT_LE(AuditRows(), rows + 2) << "after " << begin + kChunk;
  }
  EXPECT_EQ(codes[grpc::StatusCode::UNAUTHENTICATED], kCalls);
  // Bounded rows, none holding a caller's path.
  v1::ListAuditResponse audit;
  ASSERT_TRUE(ListAudit(100, &audit).ok());
  EXPECT_LE(audit.records_size(), 4);
  for (const auto& row : audit.records()) {
    EXPECT_LE(row.method().size(), 64u) << row.method().substr(0, 80);
  }
  std::printf("database %+lld bytes, audit rows %lld -> %lld\n",
              static_cast<long long>(DatabaseBytes() - bytes), static_cast<long long>(rows),
              static_cast<long long>(AuditRows()));
}

}  // namespace
}  // namespace dpcurator::server::testing
