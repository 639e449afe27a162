#include "proto/collection.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"
#include "proto/convert.h"

namespace dpcurator {

absl::StatusOr<data::Schema> CollectionSchema(const v1::CollectionParams& params) {
  v1::TableSchema copy = params.schema();
  copy.clear_label();
  if (copy.columns_size() == 0) {
    return absl::InvalidArgumentError("a collection needs a schema with at least one column");
  }
  return SchemaFromProto(copy);
}

int CollectionDimension(const data::Schema& label_free) {
  return data::FeatureLayout::ForFeatures(label_free).total_dim();
}

RecordSpace CollectionRecordSpace(const data::Schema& label_free) {
  if (label_free.image_index().has_value()) return RecordSpace{2.0, -1.0, -1.0, 1.0};
  return RecordSpace{};
}

Eigen::MatrixXd ToRecordSpace(const RecordSpace& space, Eigen::MatrixXd encoded) {
  if (space.scale != 1.0 || space.offset != 0.0) {
    encoded = (encoded.array() * space.scale + space.offset).matrix();
  }
  return encoded;
}

Eigen::MatrixXd FromRecordSpace(const RecordSpace& space, Eigen::MatrixXd records) {
  if (space.scale != 1.0 || space.offset != 0.0) {
    records = ((records.array() - space.offset) / space.scale).matrix();
  }
  return records;
}

double DefaultCollectionRadius(const data::Schema& label_free, ldp::LdpKind kind) {
  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(label_free);
  // Every coordinate's largest magnitude is 1 in both spaces: a numeric in
  // [0, 1], one bit per one-hot block, a pixel in [-1, 1].
  const double ones = layout.numeric_dim + layout.num_categorical_columns();
  return kind == ldp::LdpKind::kGaussianL2 ? std::sqrt(ones) : ones;
}

absl::StatusOr<ldp::LdpMechanism> MechanismFromParams(const v1::CollectionParams& params,
                                                      v1::CollectionParams* resolved) {
  DPC_ASSIGN_OR_RETURN(data::Schema schema, CollectionSchema(params));
  DPC_ASSIGN_OR_RETURN(ldp::LdpKind kind, ldp::ParseLdpKind(params.mechanism()));
  double radius = params.radius();
  if (!(radius >= 0.0) || !std::isfinite(radius)) {
    return absl::InvalidArgumentError(
        absl::StrCat("collection radius must be finite and >= 0 (0 = default), got ", radius));
  }
  if (radius == 0.0) radius = DefaultCollectionRadius(schema, kind);
  ldp::LdpMechanism::Builder builder;
  builder.SetKind(kind)
      .SetDimension(CollectionDimension(schema))
      .SetRadius(radius)
      .SetEpsilon(params.epsilon());
  if (params.delta() != 0.0 || kind == ldp::LdpKind::kGaussianL2) builder.SetDelta(params.delta());
  DPC_ASSIGN_OR_RETURN(ldp::LdpMechanism mechanism, builder.Build());
  if (resolved != nullptr) {
    *resolved = params;
    *resolved->mutable_schema() = SchemaToProto(*SchemaFromProto(params.schema()));
    resolved->set_mechanism(ldp::LdpKindName(kind));
    resolved->set_radius(radius);
  }
  return mechanism;
}

absl::StatusOr<ldp::LdpMechanism> MechanismFromCollection(const v1::Collection& collection) {
  DPC_ASSIGN_OR_RETURN(ldp::LdpMechanism mechanism, MechanismFromParams(collection.params()));
  if (mechanism.dimension() != collection.dimension()) {
    return absl::DataLossError(absl::StrCat("collection ", collection.id(), " declares dimension ",
                                            collection.dimension(), " but its schema encodes to ",
                                            mechanism.dimension()));
  }
  return mechanism;
}

double ReportValueBound(const ldp::LdpMechanism& mechanism) {
  return mechanism.ReportCoordinateBound();
}

absl::Status ValidateReport(const v1::Report& report, int dimension, double value_bound) {
  if (report.report_id().size() != kReportIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat("report_id must be exactly ", kReportIdBytes,
                                                   " bytes, got ", report.report_id().size()));
  }
  if (report.values_size() != dimension) {
    return absl::InvalidArgumentError(absl::StrCat("report has ", report.values_size(),
                                                   " values; the collection's dimension is ",
                                                   dimension));
  }
  for (int j = 0; j < dimension; ++j) {
    const double v = report.values(j);
    if (!std::isfinite(v)) {
      return absl::InvalidArgumentError(absl::StrCat("value ", j, " is not finite"));
    }
    // Also refuses everything when the bound itself is NaN (a corrupt row).
    if (!(std::fabs(v) <= value_bound)) {
      return absl::InvalidArgumentError(
          absl::StrCat("value ", j, " = ", v, " exceeds the public bound ", value_bound));
    }
  }
  return absl::OkStatus();
}

}  // namespace dpcurator
