#ifndef DPCURATOR_CLIENT_METHODS_AUTOGAN_H_
#define DPCURATOR_CLIENT_METHODS_AUTOGAN_H_

// DP-auto-GAN (issue 15 item 4) as a client method: both phases as dp_sgd
// sessions on the server, the model file, and sampling from it.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/connection.h"
#include "client/methods/method.h"
#include "core/data/table.h"
#include "core/train/autogan_trainer.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::client {

// The unit (registry.cc).
const Method& AutoganMethod();

struct AutoganRun {
  std::string dataset_id;
  v1::TableSchema schema;  // the dataset's (public) schema
  double epsilon = 1.0;    // for both phases together
  double delta = 0.0;      // the dataset's delta, recorded in the model
  // The dataset's neighbouring relation: it picks the sampling scheme the
  // server charges the steps as, which the phases' calibration must match.
  v1::NeighbouringRelation relation = v1::ADD_REMOVE;
  // A public guess of the dataset's size: q = expected batch / rows. Only
  // the sampling rate depends on it; a wrong guess changes the real batch
  // size, never the privacy guarantee (the divisor is the declared batch).
  int64_t rows_guess = 0;
  train::AutoganOptions options;
  bool sample_blocks = true;
  bool quiet = false;
  // Idempotency keys of the two sessions are derived from this (empty:
  // random), so rerunning the same command after a crash reopens the same
  // sessions instead of reserving the budget again.
  std::string key;
};

// Opens one dp_sgd session per phase, trains, and packages the released
// half (generator + decoder) as a GeneratorModel of this method.
// Phase k's noise multiplier is calibrated so that phases 1..k compose (as
// the ledger composes them) to epsilon times their cumulative share, so the
// last phase ends exactly at epsilon (docs/privacy.md 2.9).
absl::StatusOr<v1::GeneratorModel> TrainAutoganModel(Connection& analyst, const AutoganRun& run);

// DP-SGD rows at least this wide (the binary stand-in's 2,142; Adult's are
// 108) get the wide defaults below.
inline constexpr int kWideAutoganRowWidth = 512;

// The defaults of `train autogan` for DP-SGD rows of `row_width`
// (train::DpSgdRowWidth): below kWideAutoganRowWidth the trainer's own,
// tuned on Adult at epsilon 1; from it, the settings tuned on the public
// binary stand-in (bench/autogan_binary, docs/benchmarks.md "Binary
// benchmark"; see autogan.cc).
train::AutoganOptions DefaultAutoganOptions(int row_width);

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_METHODS_AUTOGAN_H_
