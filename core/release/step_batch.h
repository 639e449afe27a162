#ifndef DPCURATOR_CORE_RELEASE_STEP_BATCH_H_
#define DPCURATOR_CORE_RELEASE_STEP_BATCH_H_

// The subsample of one session step: what the step event's subsampled bound
// accounts (docs/privacy.md 3.4). One implementation for the server
// (server/releases.cc) and the empirical audit (audit/session_cases.cc),
// so the audit samples exactly as the server does.

#include <cstdint>
#include <vector>

#include "core/privacy/noise_source.h"
#include "core/privacy/relation.h"

namespace dpcurator::release {

// The fixed public batch size m of a REPLACE_ONE step at rate q over n rows:
// floor(q n), except that within a relative 1e-12 below an integer that
// integer is taken, so that a rate resolved to m / n gives m back
// (FixedBatchSize(FixedBatchSize(q, n) / n, n) == FixedBatchSize(q, n)).
// 0 for q <= 0 or n < 1; at most n. The one expression for the batch the
// server draws, the rate the ledger charges (m / n) and kernel_witness's
// divisor (issue 23, 0(c)).
int64_t FixedBatchSize(double sampling_rate, int64_t n);

// The indices of one step's batch over n rows, drawn with the noise source's
// randomness, which is part of the mechanism:
//  * REPLACE_ONE: a fixed-size batch of max(1, FixedBatchSize(q, n)) rows
//    without replacement (Wang, Balle, Kasiviswanathan 2019), by a partial
//    Fisher-Yates with UniformBelow;
//  * ADD_REMOVE: Poisson sampling (Mironov, Talwar, Zhang 2019), each row
//    independently with probability q (one UniformOpen() < q per row); the
//    batch size stays private.
std::vector<int64_t> SampleStepIndices(privacy::NeighbouringRelation relation,
                                       double sampling_rate, int64_t n,
                                       privacy::NoiseSource* noise);

}  // namespace dpcurator::release

#endif  // DPCURATOR_CORE_RELEASE_STEP_BATCH_H_
