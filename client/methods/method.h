#ifndef DPCURATOR_CLIENT_METHODS_METHOD_H_
#define DPCURATOR_CLIENT_METHODS_METHOD_H_

// A synthetic-data method is one unit of the client (issue 25 item 1), the
// way a release kind is one unit of the server (docs/architecture.md, "A
// method is a unit"). The unit owns, together, everything that must agree
// for its models to be trained and read back: its name (the `train <name>`
// word, the model file's `method`, `demo --method`), its option table, how
// it trains (from a release artefact, session steps, or its own sessions
// and recipe), the model it packages and its sampler. Commands
// (client/commands/) reach a method only through this interface and the
// registry (client/methods/registry.h).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/cli.h"
#include "client/connection.h"
#include "core/data/table.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::client {

// Every registered method, one enumerator each. The registry
// (registry.cc) binds each to its unit with an exhaustive switch, so an
// enumerator without a unit does not compile (-Wswitch, -Werror).
enum class MethodId {
  kMerf,      // DP-MERF: rff_embedding releases or session steps
  kPearl,     // PEARL: charfn_embedding releases, adversarial critic
  kAutogan,   // DP-auto-GAN: two dp_sgd sessions
  kKernel,    // DP-kernel: one kernel_witness session
  kMst,       // MST: the mst recipe release
  kSinkhorn,  // Sinkhorn deconvolution of local-DP reports
  kAim,       // AIM: the aim recipe release (issue 26)
};

// What `train <name>` did: the model to write to --out and what to say
// after it is written (the command writes the file, then prints this).
struct TrainResult {
  v1::GeneratorModel model;
  std::string message;  // whole lines, each ending in '\n'
};

// The demo's dataset on its local server, as a method trains on it.
struct DemoInput {
  Connection* analyst = nullptr;
  std::string dataset_id;
  v1::TableSchema schema;  // the dataset's public schema
  double epsilon = 1.0;    // the method's whole spend
  double delta = 0.0;      // the dataset's delta
  int64_t rows = 0;        // the dataset's (demo-public) row count
  const ParsedArgs* args = nullptr;  // the demo's options (the methods' DemoOptions among them)
  bool quiet = false;                // --json: no progress or summary lines
  // A progress line for people (nothing under --json).
  std::function<void(const std::string&)> say;
};

// What a method's demo run produced: the release it trained from (or a
// stand-in naming its sessions, with the epsilon they spent), the model,
// and how long the release took (the rest of the run is training).
struct DemoOutput {
  v1::Release release;
  v1::GeneratorModel model;
  double release_seconds = 0.0;
};

class Method {
 public:
  virtual ~Method() = default;

  virtual MethodId id() const = 0;
  // The one spelling of the method: `train <name>`, GeneratorModel.method,
  // `demo --method <name>`.
  virtual absl::string_view name() const = 0;
  // The paper's name, for help text ("DP-MERF").
  virtual absl::string_view title() const = 0;

  // `train <name>`: its summary line, --help text and option table (which
  // holds "out", the model file to write).
  virtual std::string TrainSummary() const = 0;
  virtual std::string TrainDescription() const = 0;
  virtual std::vector<OptionSpec> TrainOptions() const = 0;
  // Trains from the parsed options (reading files, opening sessions or
  // requesting its release as the method does) and packages the model.
  virtual absl::StatusOr<TrainResult> Train(const ParsedArgs& args) const = 0;
  // The release kinds whose artefact `train <name> --release FILE` reads
  // (none for methods that train on sessions), so a file of one kind given
  // to the wrong command can name the right one.
  virtual std::vector<v1::ReleaseKind> ReleaseKinds() const { return {}; }

  // `demo --method <name>`: false where the method does not train on a
  // curator's dataset (Sinkhorn fits reports that devices privatised).
  virtual bool RunsInDemo() const { return true; }
  // Options of the demo that only this method reads (the demo merges the
  // methods' tables by name, first declaration first).
  virtual std::vector<OptionSpec> DemoOptions() const { return {}; }
  virtual absl::StatusOr<DemoOutput> TrainInDemo(const DemoInput& input) const;

  // Rows in the model's schema (tabular models; the model file's format
  // version and method are checked by the caller).
  virtual absl::StatusOr<data::Table> SampleTable(const v1::GeneratorModel& model,
                                                  int64_t num_rows, uint64_t seed) const = 0;
  // Image models: writes `sample`'s --png grid and/or --idx pair (at least
  // one was given). The default refuses: the method samples no images.
  virtual absl::Status SampleImages(const ParsedArgs& args, const v1::GeneratorModel& model,
                                    int64_t num_images, uint64_t seed) const;
};

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_METHODS_METHOD_H_
