// Crash safety (issue 6): the real dpcurator-server binary is SIGKILLed
// while analysts request releases and devices stream local-DP reports, then
// restarted on the same database, several times over.
//
// What the server guarantees, and what this test asserts after every restart:
// - The start-up integrity check is clean (the binary prints it).
// - Every report whose batch was acknowledged is stored, exactly once, with
//   the values that were sent (SubmitReports acks a batch only after its
//   transaction commits, collection_service.cc).
// - Every release whose response reached the client is stored (DONE) with the
//   very artefact the client received (Ledger::Complete commits before the
//   response is written).
// - Every stored release (DONE or PENDING) carries exactly one charge, and
//   every charge belongs to such a release: no artefact is delivered without
//   its charge, and nothing is charged twice. A PENDING release was charged
//   and then the server died before its artefact was stored; it was never
//   delivered. That over-charge is the one loss a crash may cause
//   (docs/privacy.md, "Crashes"). A retry with the same idempotency key
//   completes it without a second charge if the killed attempt had not yet
//   marked its rows read; otherwise (issue 23, docs/privacy.md 6.3) the
//   retry makes it FAILED with its incident, charge kept, and never reads
//   the rows again for free.
// - The budget spent equals the composition of exactly those charges,
//   recomputed here from the request parameters, and stays <= the cap.
// After the last round every interrupted request is retried and every
// unacknowledged batch resent; then each attempted key holds one DONE (or,
// killed after its rows were read, FAILED) release and one charge, and every
// sent report is stored once.
//
// What SIGKILL cannot show: it loses the process, not the OS page cache, so
// a missing fsync (synchronous=FULL) is invisible here; that needs a power
// cut.
//
// The test can fail:
// - DPC_CRASH_TEST_MUTATION=ack_on_send makes the report clients count a
//   batch as acknowledged when they send it, as a server that acked before
//   committing would make them believe. It fails ("acknowledged report
//   missing after restart") whenever a kill lands before a commit.
// - DPC_CRASH_TEST_SERVER=/path/to/dpcurator-server runs the checks against
//   another build of the server. Built with SubmitReports writing the ack
//   before IngestReports, it fails the same way; built with RequestRelease
//   answering first and calling Ledger::Complete afterwards, it fails with
//   "received release not stored" (the release is still PENDING). (Each
//   failed 5 runs out of 5 when this test was written.)

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/connection.h"
#include "core/data/demo.h"
#include "core/privacy/conversion.h"
#include "core/privacy/events.h"
#include "server/ledger.h"
#include "server/store.h"
#include "tests/server/process_util.h"
#include "tests/server/server_test_util.h"

#ifndef DPC_SERVER_BINARY
#error "DPC_SERVER_BINARY must name the dpcurator-server binary"
#endif

namespace dpcurator::server::testing {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kRounds = 6;
constexpr int kReleaseWorkers = 2;
constexpr int kReportWorkers = 2;
constexpr int kReportsPerBatch = 20;
constexpr int64_t kDemoRows = 200;
// Every release is one (discrete) Gaussian event at this noise multiplier,
// so the budget spent by n charges is exactly the n-fold composition,
// recomputable here.
constexpr double kNoiseMultiplier = 20.0;
// Far above what a run spends (about 6 for 1000 releases at s = 20), so
// every admission is accepted and the count of charges is the only unknown.
constexpr double kEpsilonCap = 100.0;
constexpr uint32_t kSeed = 0x6c7a5d1u;
constexpr std::chrono::seconds kRpcDeadline{20};
constexpr std::chrono::seconds kStartTimeout{30};
constexpr std::chrono::seconds kProgressTimeout{20};

// The server under test: the one built with this test, unless
// DPC_CRASH_TEST_SERVER names another build (e.g. a deliberately broken one,
// to see this test fail).
std::string ServerBinary() {
  const char* other = std::getenv("DPC_CRASH_TEST_SERVER");
  return other != nullptr && *other != '\0' ? std::string(other) : std::string(DPC_SERVER_BINARY);
}

bool AckOnSendMutation() {
  const char* mutation = std::getenv("DPC_CRASH_TEST_MUTATION");
  return mutation != nullptr && std::string(mutation) == "ack_on_send";
}

// A report's identity: (worker, counter). Its 16-byte id and its values both
// encode it, so a download (values only) can be matched to what was sent.
using ReportKey = std::pair<int, int64_t>;

std::string ReportId(const ReportKey& key) {
  std::string id(16, 'r');
  id[0] = static_cast<char>(key.first);
  for (int b = 0; b < 8; ++b) id[1 + b] = static_cast<char>((key.second >> (8 * b)) & 0xff);
  return id;
}

// The counter in base 128 (three digits): every value stays far inside the
// collection's report bound (about 181, docs/privacy.md 2.6) for counters
// below 2^21, which no run reaches.
std::vector<double> ReportValues(const ReportKey& key) {
  return {static_cast<double>(key.first), static_cast<double>(key.second % 128),
          static_cast<double>((key.second / 128) % 128), static_cast<double>(key.second / 16384)};
}

ReportKey KeyOfValues(const double* values) {
  return {static_cast<int>(values[0]),
          static_cast<int64_t>(values[1]) + 128 * static_cast<int64_t>(values[2]) +
              16384 * static_cast<int64_t>(values[3])};
}

// The composed epsilon of `count` releases at kNoiseMultiplier, at kDelta.
double EpsilonOfReleases(int64_t count) {
  if (count == 0) return 0.0;
  auto one = privacy::PrivacyEvent::DiscreteGaussian(kNoiseMultiplier);  // what the server charges
  auto many = privacy::PrivacyEvent::SelfCompose(*one, count);
  return privacy::ComputeEpsilonReport(*many, kDelta)->epsilon;
}

v1::ReleaseRequest ReleaseRequestFor(const std::string& dataset_id, const std::string& key) {
  v1::ReleaseRequest request;
  request.set_dataset_id(dataset_id);
  request.set_idempotency_key(key);
  request.set_noise_multiplier(kNoiseMultiplier);
  request.mutable_rff_embedding()->set_num_frequencies(50);
  request.mutable_rff_embedding()->set_seed(12345);
  return request;
}

// Whether the server's start-up log says its integrity check was clean:
// the JSON event line {"event":"integrity_check",...,"problems":0} (or the
// older text line "integrity check: clean"), and no problem lines.
bool IntegrityCheckClean(const std::string& log) {
  if (log.find("integrity_problem") != std::string::npos ||
      log.find("  integrity: ") != std::string::npos) {
    return false;
  }
  if (log.find("integrity check: clean\n") != std::string::npos) return true;
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    const std::string line = log.substr(start, end - start);
    if (line.find("\"event\":\"integrity_check\"") != std::string::npos) {
      for (const char* clean : {"\"problems\":0,", "\"problems\":0}"}) {
        if (line.find(clean) != std::string::npos) return true;
      }
      return false;
    }
    start = end + 1;
  }
  return false;
}

struct ReceivedRelease {
  std::string key;
  std::string release_id;
  std::string embedding;  // serialized, as the client received it
};

// One analyst thread's history, kept across rounds.
struct ReleaseWorker {
  int index = 0;
  int64_t next_key = 0;
  // Sent, but no answer came (the server was killed): retried next round
  // with the same idempotency key.
  std::optional<std::string> in_flight;
  std::vector<std::string> attempted;
  std::vector<ReceivedRelease> received;
  int retries = 0;
  int replayed_retries = 0;  // the retry found the release already DONE
  // Keys whose retry found the release final: killed after its rows were
  // marked read, so FAILED with its charge, never recomputed.
  std::set<std::string> failed_after_read;
  std::vector<std::string> unexpected;  // errors while the server was alive
};

// One device thread's history, kept across rounds.
struct ReportWorker {
  int index = 0;
  int64_t next_counter = 0;
  // The batch whose ack never came: resent first next round.
  std::vector<ReportKey> unacked;
  std::set<ReportKey> sent;
  std::set<ReportKey> acked;
  int64_t accepted = 0;
  int64_t duplicates = 0;
  std::vector<std::string> unexpected;
};

// What one round's threads share with the thread that kills the server.
struct Round {
  std::string address;
  std::string dataset_id;
  std::string collection_id;
  std::atomic<bool> kill_issued{false};
  std::atomic<int> releases_done{0};
  std::atomic<int> batches_acked{0};
};

// Requests one release with the worker's pending key (or a new one); false
// when the RPC failed.
bool RequestOneRelease(client::Connection& analyst, ReleaseWorker& worker, const Round& round) {
  const bool retry = worker.in_flight.has_value();
  if (!retry) {
    worker.in_flight = absl::StrCat("crash-", worker.index, "-", worker.next_key++);
    worker.attempted.push_back(*worker.in_flight);
  }
  v1::Release release;
  auto context = analyst.NewContext();
  grpc::Status status = analyst.releases().RequestRelease(
      context.get(), ReleaseRequestFor(round.dataset_id, *worker.in_flight), &release);
  if (retry && status.error_code() == grpc::StatusCode::FAILED_PRECONDITION &&
      absl::StrContains(status.error_message(), "failed after the server read the dataset")) {
    ++worker.retries;
    worker.failed_after_read.insert(*worker.in_flight);
    worker.in_flight.reset();
    return true;
  }
  if (!status.ok()) {
    if (!round.kill_issued.load()) {
      worker.unexpected.push_back(absl::StrCat("release ", *worker.in_flight, ": ",
                                               status.error_code(), " ", status.error_message()));
    }
    return false;
  }
  if (retry) {
    ++worker.retries;
    if (release.replayed()) ++worker.replayed_retries;
  }
  worker.received.push_back(
      {*worker.in_flight, release.id(), release.embedding().SerializeAsString()});
  worker.in_flight.reset();
  return true;
}

void RunReleaseWorker(ReleaseWorker& worker, Round& round) {
  client::Connection analyst =
      client::Connection::Plaintext(round.address, kAnalystToken, kRpcDeadline);
  while (RequestOneRelease(analyst, worker, round)) ++round.releases_done;
}

// Streams batches until the stream breaks (the server was killed). With
// `max_batches` >= 0, stops after that many acked batches.
void RunReportWorker(ReportWorker& worker, Round& round, int max_batches = -1) {
  client::Connection device =
      client::Connection::Plaintext(round.address, kDeviceToken, kRpcDeadline);
  auto context = device.NewContext();
  auto stream = device.collections().SubmitReports(context.get());
  int64_t batch_index = 0;
  while (max_batches < 0 || batch_index < max_batches) {
    if (worker.unacked.empty()) {
      if (max_batches >= 0) break;  // resend mode: nothing left to resend
      for (int r = 0; r < kReportsPerBatch; ++r) {
        worker.unacked.emplace_back(worker.index, worker.next_counter++);
      }
    }
    v1::SubmitReportsRequest batch;
    batch.set_collection_id(round.collection_id);
    for (const ReportKey& key : worker.unacked) {
      worker.sent.insert(key);
      v1::Report* report = batch.add_reports();
      report->set_report_id(ReportId(key));
      for (double v : ReportValues(key)) report->add_values(v);
    }
    if (AckOnSendMutation()) worker.acked.insert(worker.unacked.begin(), worker.unacked.end());
    if (!stream->Write(batch)) break;
    v1::SubmitReportsAck ack;
    if (!stream->Read(&ack)) break;
    if (ack.batch_index() != batch_index || ack.rejections_size() != 0 ||
        ack.accepted() + ack.duplicates() != batch.reports_size()) {
      worker.unexpected.push_back(absl::StrCat("unexpected ack: ", ack.ShortDebugString()));
      break;
    }
    worker.acked.insert(worker.unacked.begin(), worker.unacked.end());
    worker.accepted += ack.accepted();
    worker.duplicates += ack.duplicates();
    worker.unacked.clear();
    ++batch_index;
    ++round.batches_acked;
  }
  stream->WritesDone();
  grpc::Status status = stream->Finish();
  if (!status.ok() && !round.kill_issued.load()) {
    worker.unexpected.push_back(
        absl::StrCat("report stream: ", status.error_code(), " ", status.error_message()));
  }
}

class CrashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<TempDir>();
    db_path_ = dir_->File("curator.db");
    tokens_path_ = dir_->File("tokens.txt");
    std::ofstream tokens(tokens_path_);
    tokens << "curator " << kCuratorToken << "\n"
           << "analyst " << kAnalystToken << "\n"
           << "device " << kDeviceToken << "\n";
    ASSERT_TRUE(tokens.good());
  }

  // SIGKILLs a server that still runs: no child outlives a failed test.
  void TearDown() override {
    server_.reset();
    dir_.reset();
  }

  std::vector<std::string> ServerArgv(const std::string& port_file) const {
    return {ServerBinary(),
            absl::StrCat("--db=", db_path_),
            "--listen=127.0.0.1:0",
            absl::StrCat("--tokens=", tokens_path_),
            "--insecure_dev",
            // One device token sends every round's reports, as many as the
            // rounds allow: no per-token quota in the way.
            "--max_reports_per_token=1000000000",
            absl::StrCat("--port_file=", port_file)};
  }

  // Starts the server on the test's database, waits until it serves, and
  // checks what its start-up integrity check printed.
  void StartServer(const std::string& tag) {
    const std::string port_file = dir_->File(absl::StrCat("port-", tag));
    auto child = ChildProcess::Spawn(ServerArgv(port_file),
                                     dir_->File(absl::StrCat("server-", tag, ".log")));
    ASSERT_TRUE(child.ok()) << child.status();
    server_ = *std::move(child);
    auto port = server_->WaitForPort(port_file, kStartTimeout);
    ASSERT_TRUE(port.ok()) << port.status();
    address_ = absl::StrCat("127.0.0.1:", *port);
    // main.cc logs the verdict before it writes the port file.
    const std::string log = ReadWholeFile(server_->log_path());
    EXPECT_TRUE(IntegrityCheckClean(log)) << "start-up " << tag << " found problems:\n" << log;
  }

  void KillServer() {
    auto status = server_->KillAndWait(SIGKILL);
    ASSERT_TRUE(status.ok()) << status.status();
    // Killed by us, not dead of something else before.
    EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL)
        << "wait status " << *status << "; log:\n"
        << ReadWholeFile(server_->log_path());
    server_.reset();
  }

  // A start-up interrupted by SIGKILL after `delay` (possibly while it
  // opens, migrates or checks the database).
  void KillDuringStartUp(const std::string& tag, std::chrono::milliseconds delay) {
    auto child = ChildProcess::Spawn(ServerArgv(dir_->File(absl::StrCat("port-", tag))),
                                     dir_->File(absl::StrCat("server-", tag, ".log")));
    ASSERT_TRUE(child.ok()) << child.status();
    server_ = *std::move(child);
    std::this_thread::sleep_for(delay);
    auto status = server_->KillAndWait(SIGKILL);
    ASSERT_TRUE(status.ok()) << status.status();
    server_.reset();
  }

  client::Connection Connect(const std::string& token) const {
    return client::Connection::Plaintext(address_, token, kRpcDeadline);
  }

  // Dataset with the demo rows and an LDP collection, on the running server.
  void CreateDatasetAndCollection() {
    client::Connection curator = Connect(kCuratorToken);
    {
      v1::CreateDatasetRequest request;
      request.set_name("crash");
      *request.mutable_schema() = DemoSchemaProto();
      request.mutable_budget()->set_epsilon(kEpsilonCap);
      request.mutable_budget()->set_delta(kDelta);
      request.set_relation(v1::ADD_REMOVE);
      v1::Dataset dataset;
      auto context = curator.NewContext();
      grpc::Status status = curator.datasets().CreateDataset(context.get(), request, &dataset);
      ASSERT_TRUE(status.ok()) << status.error_message();
      dataset_id_ = dataset.id();
    }
    {
      v1::UploadRowsRequest message;
      message.set_dataset_id(dataset_id_);
      for (auto& row : DemoRows(data::GenerateDemoTable(kDemoRows, kSeed))) {
        *message.add_rows() = std::move(row);
      }
      v1::UploadRowsResponse response;
      auto context = curator.NewContext();
      auto writer = curator.datasets().UploadRows(context.get(), &response);
      writer->Write(message);
      writer->WritesDone();
      grpc::Status status = writer->Finish();
      ASSERT_TRUE(status.ok()) << status.error_message();
      ASSERT_EQ(response.total_rows(), kDemoRows);
    }
    {
      v1::CreateCollectionRequest request;
      request.set_name("crash");
      *request.mutable_params() = LdpCollectionParams();
      v1::Collection collection;
      auto context = curator.NewContext();
      grpc::Status status =
          curator.collections().CreateCollection(context.get(), request, &collection);
      ASSERT_TRUE(status.ok()) << status.error_message();
      ASSERT_EQ(collection.dimension(), static_cast<int>(ReportValues({0, 0}).size()));
      collection_id_ = collection.id();
    }
  }

  // One round on the running server: concurrent releases and report
  // streams, then SIGKILL after `wait_for_progress` (both kinds of work
  // acknowledged at least once) and `delay`.
  void RunRoundAndKill(bool wait_for_progress, std::chrono::milliseconds delay) {
    Round round;
    round.address = address_;
    round.dataset_id = dataset_id_;
    round.collection_id = collection_id_;
    std::vector<std::thread> threads;
    for (auto& worker : release_workers_) {
      threads.emplace_back([&worker, &round] { RunReleaseWorker(worker, round); });
    }
    for (auto& worker : report_workers_) {
      threads.emplace_back([&worker, &round] { RunReportWorker(worker, round); });
    }
    if (wait_for_progress) {
      const auto deadline = Clock::now() + kProgressTimeout;
      while (Clock::now() < deadline &&
             (round.releases_done.load() == 0 || round.batches_acked.load() == 0)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }
    std::this_thread::sleep_for(delay);
    round.kill_issued = true;
    KillServer();
    for (auto& thread : threads) thread.join();
    std::printf("  killed after %d releases, %d acked batches this round\n",
                round.releases_done.load(), round.batches_acked.load());
  }

  // The invariants of the header comment, on the running server. With
  // `resolved` (every interrupted request retried, every batch resent), also
  // that nothing is pending and every sent report is stored.
  void VerifyState(bool resolved) {
    client::Connection analyst = Connect(kAnalystToken);

    // Reports: every acknowledged one stored once, nothing unknown stored.
    std::set<ReportKey> sent, acked;
    for (const auto& worker : report_workers_) {
      sent.insert(worker.sent.begin(), worker.sent.end());
      acked.insert(worker.acked.begin(), worker.acked.end());
    }
    std::map<ReportKey, int> stored;
    {
      auto context = analyst.NewContext();
      v1::DownloadReportsRequest request;
      request.set_collection_id(collection_id_);
      auto reader = analyst.collections().DownloadReports(context.get(), request);
      v1::ReportChunk chunk;
      int dimension = 0;
      while (reader->Read(&chunk)) {
        if (chunk.has_collection()) dimension = chunk.collection().dimension();
        ASSERT_GT(dimension, 0);
        ASSERT_EQ(chunk.values_size(), chunk.rows() * dimension);
        for (int i = 0; i < chunk.rows(); ++i) {
          const ReportKey key = KeyOfValues(chunk.values().data() + i * dimension);
          ASSERT_EQ(std::vector<double>(chunk.values().begin() + i * dimension,
                                        chunk.values().begin() + (i + 1) * dimension),
                    ReportValues(key))
              << "stored report values differ from any sent report";
          ++stored[key];
        }
      }
      grpc::Status status = reader->Finish();
      ASSERT_TRUE(status.ok()) << status.error_message();
    }
    int missing = 0;
    for (const ReportKey& key : acked) {
      if (stored.count(key) == 0 && ++missing <= 5) {
        ADD_FAILURE() << "acknowledged report missing after restart: worker " << key.first
                      << " counter " << key.second;
      }
    }
    EXPECT_EQ(missing, 0) << "of " << acked.size() << " acknowledged reports";
    for (const auto& [key, count] : stored) {
      EXPECT_EQ(count, 1) << "report " << key.first << "/" << key.second << " stored twice";
      EXPECT_EQ(sent.count(key), 1u) << "stored report never sent";
    }
    {
      auto context = analyst.NewContext();
      v1::GetCollectionRequest request;
      request.set_collection_id(collection_id_);
      v1::Collection collection;
      grpc::Status status = analyst.collections().GetCollection(context.get(), request,
                                                                &collection);
      ASSERT_TRUE(status.ok()) << status.error_message();
      EXPECT_EQ(collection.report_count(), static_cast<int64_t>(stored.size()));
    }
    if (resolved) {
      EXPECT_EQ(stored.size(), sent.size());
    }

    // Releases.
    std::set<std::string> attempted;
    std::vector<const ReceivedRelease*> received;
    std::set<std::string> failed_after_read;
    // A key still in flight may already be FAILED: a retry after the crash
    // found its rows marked read and made it final (docs/privacy.md 6.3),
    // and the next kill took the answer. Its worker learns so on the retry.
    std::set<std::string> in_flight;
    for (const auto& worker : release_workers_) {
      attempted.insert(worker.attempted.begin(), worker.attempted.end());
      failed_after_read.insert(worker.failed_after_read.begin(), worker.failed_after_read.end());
      if (worker.in_flight.has_value()) in_flight.insert(*worker.in_flight);
      for (const auto& r : worker.received) received.push_back(&r);
    }
    std::map<std::string, v1::ReleaseSummary> by_key;
    std::map<std::string, std::string> status_by_id;
    {
      // Every page (server/paging.h): a long run makes more than one.
      auto releases = client::ListAllReleases(&analyst, dataset_id_);
      ASSERT_TRUE(releases.ok()) << releases.status();
      for (const auto& summary : *releases) {
        EXPECT_EQ(attempted.count(summary.idempotency_key()), 1u)
            << "release for a key never used: " << summary.idempotency_key();
        const bool final_failure = failed_after_read.count(summary.idempotency_key()) > 0;
        if (final_failure) {
          EXPECT_EQ(summary.status(), "FAILED") << summary.ShortDebugString();
        } else if (!(in_flight.count(summary.idempotency_key()) > 0 &&
                     summary.status() == "FAILED")) {
          EXPECT_TRUE(summary.status() == "DONE" || summary.status() == "PENDING")
              << summary.ShortDebugString() << " (no computation should fail here)";
        }
        if (resolved && !final_failure) {
          EXPECT_EQ(summary.status(), "DONE") << summary.ShortDebugString();
        }
        by_key[summary.idempotency_key()] = summary;
        status_by_id[summary.id()] = summary.status();
      }
    }
    // Delivered => stored, with the same artefact.
    for (const ReceivedRelease* r : received) {
      auto found = by_key.find(r->key);
      ASSERT_NE(found, by_key.end()) << "received release not stored: key " << r->key;
      EXPECT_EQ(found->second.id(), r->release_id);
      EXPECT_EQ(found->second.status(), "DONE") << "received release not stored: " << r->key;
      v1::Release stored_release;
      v1::GetReleaseRequest request;
      request.set_release_id(r->release_id);
      auto context = analyst.NewContext();
      grpc::Status status = analyst.releases().GetRelease(context.get(), request, &stored_release);
      ASSERT_TRUE(status.ok()) << status.error_message();
      EXPECT_EQ(stored_release.embedding().SerializeAsString(), r->embedding)
          << "the stored artefact of " << r->key << " is not the one delivered";
    }
    // Charges: exactly one per stored release, none elsewhere, no refunds.
    // Every page of the report (GetBudget is paged, issue 36).
    auto whole = client::GetWholeBudget(&analyst, dataset_id_);
    ASSERT_TRUE(whole.ok()) << whole.status();
    const v1::BudgetReport& budget = *whole;
    std::map<std::string, int> charges;
    for (const auto& event : budget.events()) {
      EXPECT_EQ(event.refund_of(), 0) << event.ShortDebugString();
      EXPECT_EQ(status_by_id.count(event.release_id()), 1u)
          << "charge without a stored release: " << event.ShortDebugString();
      ++charges[event.release_id()];
    }
    for (const auto& [id, status] : status_by_id) {
      EXPECT_EQ(charges[id], 1) << "release " << id << " (" << status << ") charged "
                                << charges[id] << " times";
    }
    const int64_t charged = static_cast<int64_t>(status_by_id.size());
    EXPECT_EQ(budget.events_size(), charged);
    EXPECT_GE(charged, static_cast<int64_t>(received.size()));
    EXPECT_LE(charged, static_cast<int64_t>(attempted.size()));
    if (resolved) {
      EXPECT_EQ(charged, static_cast<int64_t>(attempted.size()));
    }
    const double expected = EpsilonOfReleases(charged);
    EXPECT_NEAR(budget.epsilon_spent(), expected, 1e-9 * std::max(1.0, expected))
        << "spent differs from the composition of the " << charged << " charged releases";
    EXPECT_LE(budget.epsilon_spent(), kEpsilonCap);
    int pending = 0;
    for (const auto& [id, status] : status_by_id) pending += status == "PENDING";
    std::printf("  state: %zu/%zu reports acked/stored, %zu releases received, %lld charged "
                "(%d pending), epsilon spent %.6f\n",
                acked.size(), stored.size(), received.size(), static_cast<long long>(charged),
                pending, budget.epsilon_spent());
  }

  // Retries every interrupted release (same key) and resends every
  // unacknowledged batch, on the running server.
  void ResolveInterrupted() {
    Round round;
    round.address = address_;
    round.dataset_id = dataset_id_;
    round.collection_id = collection_id_;
    for (auto& worker : release_workers_) {
      if (!worker.in_flight.has_value()) continue;
      client::Connection analyst = Connect(kAnalystToken);
      EXPECT_TRUE(RequestOneRelease(analyst, worker, round));
    }
    for (auto& worker : report_workers_) {
      if (worker.unacked.empty()) continue;
      RunReportWorker(worker, round, /*max_batches=*/1);
      EXPECT_TRUE(worker.unacked.empty());
    }
  }

  // After the server is gone: the same checks the binary runs at start-up,
  // in process, plus the store's own view of the counts.
  void VerifyDatabaseInProcess() {
    auto opened = OpenDatabase(db_path_);
    ASSERT_TRUE(opened.ok()) << opened.status();
    auto problems = opened->store->CheckIntegrity();
    ASSERT_TRUE(problems.ok()) << problems.status();
    EXPECT_TRUE(problems->empty()) << problems->front();
    auto totals = opened->ledger->VerifyTotals();
    ASSERT_TRUE(totals.ok()) << totals.status();
    EXPECT_TRUE(totals->empty()) << totals->front();
    int64_t sent = 0, attempted = 0, failed_after_read = 0;
    for (const auto& worker : report_workers_) sent += static_cast<int64_t>(worker.sent.size());
    for (const auto& worker : release_workers_) {
      attempted += static_cast<int64_t>(worker.attempted.size());
      failed_after_read += static_cast<int64_t>(worker.failed_after_read.size());
    }
    auto count = [&](const std::string& sql) -> int64_t {
      auto db = opened->database->Lock();
      auto query = db->Prepare(sql);
      EXPECT_TRUE(query.ok()) << query.status();
      if (!query.ok()) return -1;
      auto row = query->Step();
      EXPECT_TRUE(row.ok() && *row);
      return query->ColumnInt(0);
    };
    EXPECT_EQ(count("SELECT COUNT(*) FROM ldp_reports"), sent);
    EXPECT_EQ(count("SELECT COUNT(*) FROM releases WHERE status = 'DONE' AND artefact IS NOT NULL"),
              attempted - failed_after_read);
    EXPECT_EQ(count("SELECT COUNT(*) FROM releases WHERE status = 'FAILED' AND charged_failure = 1"),
              failed_after_read);
    EXPECT_EQ(count("SELECT COUNT(*) FROM ledger_events"), attempted);
  }

  std::unique_ptr<TempDir> dir_;
  std::string db_path_;
  std::string tokens_path_;
  std::unique_ptr<ChildProcess> server_;
  std::string address_;
  std::string dataset_id_;
  std::string collection_id_;
  std::vector<ReleaseWorker> release_workers_;
  std::vector<ReportWorker> report_workers_;
};

TEST_F(CrashTest, SigkillDuringReleasesAndIngestionLosesNothingAcknowledged) {
  if (AckOnSendMutation()) std::printf("MUTATION ack_on_send: this run should fail\n");
  release_workers_.resize(kReleaseWorkers);
  for (int i = 0; i < kReleaseWorkers; ++i) release_workers_[i].index = i;
  report_workers_.resize(kReportWorkers);
  for (int i = 0; i < kReportWorkers; ++i) report_workers_[i].index = i;

  std::mt19937 random(kSeed);
  for (int r = 0; r < kRounds; ++r) {
    if (r % 3 == 2) {
      // A start-up killed early (while it opens, migrates or checks the
      // database, or just after), then a normal one.
      KillDuringStartUp("startup-kill",
                        std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 30)(random)));
    }
    ASSERT_NO_FATAL_FAILURE(StartServer(absl::StrCat("round", r)));
    if (r == 0) {
      ASSERT_NO_FATAL_FAILURE(CreateDatasetAndCollection());
    } else {
      ASSERT_NO_FATAL_FAILURE(VerifyState(/*resolved=*/false));
    }
    // Even rounds kill mid-stream, after both kinds of work have been
    // acknowledged; odd rounds kill early, while the retries and resends of
    // the previous round and the first connections are in flight.
    const bool wait_for_progress = r % 2 == 0;
    const int max_delay_ms = wait_for_progress ? 400 : 60;
    const auto delay = std::chrono::milliseconds(
        std::uniform_int_distribution<int>(0, max_delay_ms)(random));
    std::printf("round %d: kill %s + %lld ms\n", r,
                wait_for_progress ? "after progress" : "early",
                static_cast<long long>(delay.count()));
    ASSERT_NO_FATAL_FAILURE(RunRoundAndKill(wait_for_progress, delay));
  }

  ASSERT_NO_FATAL_FAILURE(StartServer("final"));
  ASSERT_NO_FATAL_FAILURE(VerifyState(/*resolved=*/false));
  ResolveInterrupted();
  ASSERT_NO_FATAL_FAILURE(VerifyState(/*resolved=*/true));
  ASSERT_NO_FATAL_FAILURE(KillServer());
  VerifyDatabaseInProcess();

  int64_t received = 0, acked = 0;
  for (const auto& worker : release_workers_) {
    received += static_cast<int64_t>(worker.received.size());
    for (const auto& error : worker.unexpected) ADD_FAILURE() << error;
    std::printf("release worker %d: %zu attempted, %zu received, %d retried after a kill "
                "(%d of them already stored, %zu final: killed after reading rows)\n",
                worker.index, worker.attempted.size(), worker.received.size(), worker.retries,
                worker.replayed_retries, worker.failed_after_read.size());
  }
  for (const auto& worker : report_workers_) {
    acked += static_cast<int64_t>(worker.acked.size());
    for (const auto& error : worker.unexpected) ADD_FAILURE() << error;
    std::printf("report worker %d: %zu sent, %zu acked, %lld accepted, %lld duplicates\n",
                worker.index, worker.sent.size(), worker.acked.size(),
                static_cast<long long>(worker.accepted),
                static_cast<long long>(worker.duplicates));
  }
  // Otherwise the kills landed before any work and the checks were vacuous.
  EXPECT_GT(received, 0);
  EXPECT_GT(acked, 0);
}

}  // namespace
}  // namespace dpcurator::server::testing
