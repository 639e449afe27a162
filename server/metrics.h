#ifndef DPCURATOR_SERVER_METRICS_H_
#define DPCURATOR_SERVER_METRICS_H_

// Prometheus metrics of the curator server (issue 6, "Operations"), kept in a
// prometheus-cpp registry and, when an address is given, served as text
// exposition on http://<address>/metrics.
//
// Labels stay low-cardinality and carry nothing private: dataset and
// collection ids (made by the server, bounded by what the curator creates, and
// only ever taken from an object that exists), release kinds, short method
// names, status codes and refusal reasons. Never tokens, record values or
// anything else a caller typed. The budget gauges are data-independent: the
// ledger charges depend on requests, not rows.
//
//   dpcurator_releases_total{kind,dataset}            one-shot releases delivered
//   dpcurator_release_refusals_total{reason}          RequestRelease/OpenSession errors
//   dpcurator_epsilon_spent{dataset}                  from the ledger, after each charge
//   dpcurator_epsilon_remaining{dataset}              and refund, and at start-up
//   dpcurator_ldp_reports_total{collection,outcome}   accepted | rejected | duplicate
//   dpcurator_sessions_open                           sessions in state OPEN
//   dpcurator_rpcs_total{method,code}                 finished RPCs
//   dpcurator_rpc_duration_seconds{method}            histogram, handler wall time

#include <grpcpp/support/server_interceptor.h>

#include <memory>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace prometheus {
class Counter;
class Exposer;
class Gauge;
class Histogram;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace dpcurator::server {

class Authorizer;
class Ledger;
class Store;

class Metrics {
 public:
  class Builder {
   public:
    // host:port of the /metrics endpoint (port 0: any free port). Empty, the
    // default: no endpoint; the metrics are still kept and Scrape() works.
    Builder& SetListenAddress(std::string address) {
      listen_address_ = std::move(address);
      return *this;
    }
    // INVALID_ARGUMENT for an address that is not host:port, UNAVAILABLE when
    // it cannot be bound.
    absl::StatusOr<std::unique_ptr<Metrics>> Build();

   private:
    std::string listen_address_;
  };

  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // The bound port of the endpoint; 0 when there is none.
  int port() const { return port_; }
  // The text exposition format, as the endpoint serves it.
  std::string Scrape() const;

  // A one-shot release was computed and delivered (not a replay).
  void RecordRelease(absl::string_view kind, absl::string_view dataset_id);
  // A RequestRelease or OpenSession call ended with `code` (not OK).
  void RecordRefusal(absl::StatusCode code);
  // An incident: a release ("release") or session step ("session_step")
  // failed after private rows were read. Exposed as
  // dpcurator_failures_after_rows_read_total{object=...}; every admitted
  // mechanism is total (docs/privacy.md 6.4), so it stays 0 unless a bug
  // or the machine failed.
  void RecordFailureAfterRowsRead(absl::string_view object);
  // The dataset's ledger position after a charge or refund.
  void SetEpsilon(absl::string_view dataset_id, double spent, double remaining);
  // SetEpsilon, and the dataset's open sessions (Ledger::Position).
  void UpdateBudget(absl::string_view dataset_id, double spent, double remaining,
                    int64_t open_sessions);
  // One SubmitReports batch as acknowledged.
  void RecordReports(absl::string_view collection_id, const v1::SubmitReportsAck& ack);
  // A finished RPC (full method name, e.g. "/dpcurator.v1.ReleaseService/RequestRelease";
  // labelled by MethodLabel).
  void RecordRpc(absl::string_view method, absl::StatusCode code, double seconds);

  // Refusal reason of a status code: "budget" (RESOURCE_EXHAUSTED), "invalid"
  // (INVALID_ARGUMENT, FAILED_PRECONDITION, OUT_OF_RANGE, ALREADY_EXISTS),
  // "auth" (UNAUTHENTICATED, PERMISSION_DENIED), "not_found", else "error".
  static const char* RefusalReason(absl::StatusCode code);
  // "ReleaseService/RequestRelease" or "Health/Check" for a method of the
  // server's table (CanonicalMethod), "unknown" for any other path: the
  // label set stays bounded whatever paths a client sends.
  static std::string MethodLabel(absl::string_view method);

  // A server interceptor that times every call, records it (RecordRpc, and
  // RecordRefusal for the admission methods) and writes one "rpc" log line
  // with the caller's role as `authorizer` decided it. Install it FIRST, before
  // the authorizer's interceptor: send hooks run in list order, so it reads
  // the caller while the authorizer still holds the call's verdict (receive
  // hooks run in reverse order, so the verdict exists by then). A refused
  // call is counted with the refusal (Authorizer::Refusal), the status the
  // authorizer's interceptor sends whatever the handler returned: a stream
  // refused by the input-limits interceptor mid-way may end its handler OK.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeInterceptorFactory(
      Authorizer* authorizer);

 private:
  Metrics();

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* releases_ = nullptr;
  prometheus::Family<prometheus::Counter>* refusals_ = nullptr;
  prometheus::Family<prometheus::Gauge>* epsilon_spent_ = nullptr;
  prometheus::Family<prometheus::Gauge>* epsilon_remaining_ = nullptr;
  prometheus::Family<prometheus::Counter>* reports_ = nullptr;
  prometheus::Gauge* sessions_open_ = nullptr;
  prometheus::Family<prometheus::Counter>* failures_after_rows_read_ = nullptr;
  prometheus::Family<prometheus::Counter>* rpcs_ = nullptr;
  prometheus::Family<prometheus::Histogram>* rpc_duration_ = nullptr;
  // Open sessions per dataset; the gauge is their sum.
  std::mutex sessions_mutex_;
  absl::flat_hash_map<std::string, int64_t> open_sessions_;
  // Declared last: destroyed first, so no scrape runs on a dead registry.
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

// Re-reads one dataset's ledger position (Ledger::Position: the running
// state and an index count of open sessions, never the event history) into
// the gauges. Metrics never fail
// a request: an error is logged (metrics_refresh_failed) and the gauge is
// corrected by the dataset's next charge, GetBudget or a restart.
void RefreshBudget(Ledger& ledger, Metrics& metrics, const std::string& dataset_id);
// RefreshBudget for every dataset (start-up, after idle sessions are closed).
absl::Status RefreshAllBudgets(Store& store, Ledger& ledger, Metrics& metrics);

}  // namespace dpcurator::server

#endif  // DPCURATOR_SERVER_METRICS_H_
