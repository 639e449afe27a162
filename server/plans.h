#ifndef DPCURATOR_SERVER_PLANS_H_
#define DPCURATOR_SERVER_PLANS_H_

// The release plans (plan/, issue 37) by the names the server's code and
// tests use: the server wires these functions to the ledger, the store and
// the memory budget, and the empirical audit (audit/) runs the same ones.

#include "plan/footprint.h"
#include "plan/partition.h"
#include "plan/release_kinds.h"
#include "plan/releases.h"
#include "plan/session_part.h"

namespace dpcurator::server {

using plan::BindingFor;
using plan::CheckExternalRelease;
using plan::CheckStepOrder;
using plan::CheckStepQuery;
using plan::CheckSubmittedShape;
using plan::CheckSubmittedTablesShape;
using plan::ComputeAimRelease;
using plan::ComputeMarginalsRelease;
using plan::ComputeMstRelease;
using plan::ComputeRecipeReleaseFromTables;
using plan::ComputeRelease;
using plan::ComputeReleaseFromStatistic;
using plan::ComputeSessionStep;
using plan::EncodedRowBytes;
using plan::EngineOutput;
using plan::FixedBatchSize;
using plan::kAimServerBytesPerModelCell;
using plan::kArtefactOverheadBytes;
using plan::KeepsOnlyLatestAnswer;
using plan::kMaxMstColumns;
using plan::kTableOverheadBytes;
using plan::MarginalsReleasePlan;
using plan::PartitionedPlan;
using plan::PartitionedSessionsEvent;
using plan::PartitionValues;
using plan::PlanFootprint;
using plan::PlanMarginalsRelease;
using plan::PlanPartitionedSessions;
using plan::PlanRelease;
using plan::PlanSession;
using plan::PreparedEngine;
using plan::PrepareRelease;
using plan::PublicRowCount;
using plan::RawRowBytes;
using plan::ReleaseKindBinding;
using plan::ReleasePlan;
using plan::ResolveCliqueColumns;
using plan::ResolvePartition;
using plan::ResolvePartitionValues;
using plan::ResolveRequestedNoiseMultiplier;
using plan::RowIndicesOfPart;
using plan::RowsOfPart;
using plan::SaturatingAdd;
using plan::SaturatingMul;
using plan::SessionPart;
using plan::SessionPlan;
using plan::SessionStepFootprint;
using plan::SetStepAnswer;

}  // namespace dpcurator::server

#endif  // DPCURATOR_SERVER_PLANS_H_
