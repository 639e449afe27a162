// The MST unit: `train mst` fits the tree model to an mst release (or
// releases and fits in one command), the demo does the same on its dataset,
// and `sample` draws from the model file.
#include "client/methods/mst.h"

#include <chrono>
#include <cstdio>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/methods/label_warning.h"
#include "client/model_package.h"
#include "client/proto_file.h"
#include "core/data/discretize.h"
#include "core/train/mst.h"
#include "core/util/status_macros.h"
#include "proto/convert.h"
#include "proto/release_kinds.h"

namespace dpcurator::client {
// The tree model's fields of a model file (GeneratorModel fields 40-44),
// written and sampled (defined below; the aim unit has its own model now).
void PutTreeModel(const train::TreeModel& tree, v1::GeneratorModel* model);
absl::StatusOr<data::Table> SampleMstModel(const v1::GeneratorModel& model, int64_t num_rows,
                                           uint64_t seed);

namespace {

// The artefact's tables agree with its own domain (a file edited or cut
// short is refused here, naming the table, before the fit indexes them).
absl::Status CheckArtefact(const v1::MstArtefact& artefact) {
  const int n = artefact.domain_sizes_size();
  auto check = [&](const v1::NoisyMarginalTable& t, const std::string& what) -> absl::Status {
    int64_t cells = 1;
    if (t.clique_size() != t.shape_size() || t.clique_size() == 0) {
      return absl::DataLossError(absl::StrCat("mst release: ", what, " has no consistent shape"));
    }
    for (int k = 0; k < t.clique_size(); ++k) {
      if (t.clique(k) < 0 || t.clique(k) >= n || t.shape(k) != artefact.domain_sizes(t.clique(k))) {
        return absl::DataLossError(
            absl::StrCat("mst release: ", what, " does not match the release's domain"));
      }
      cells *= t.shape(k);
    }
    if (cells != t.counts_size()) {
      return absl::DataLossError(absl::StrCat("mst release: ", what, " has ", t.counts_size(),
                                              " counts, its shape needs ", cells));
    }
    return absl::OkStatus();
  };
  for (int i = 0; i < artefact.one_way_size(); ++i) {
    DPC_RETURN_IF_ERROR(check(artefact.one_way(i), absl::StrCat("1-way table ", i)));
  }
  for (int i = 0; i < artefact.two_way_size(); ++i) {
    DPC_RETURN_IF_ERROR(check(artefact.two_way(i), absl::StrCat("2-way table ", i)));
  }
  return absl::OkStatus();
}

constexpr absl::string_view kMstName = "mst";

// Issue 38: rows x epsilon too small for a label pair (LabelRowsWarning),
// the rows estimated from the release's noisy 1-way tables; only when the
// schema declares a label.
std::optional<std::string> MstLabelWarning(const v1::Release& release) {
  if (!release.has_mst() || release.mst().schema().label().empty()) return std::nullopt;
  return LabelRowsWarning(kMstName, EstimatedRows(release.mst().one_way()),
                          release.mst().epsilon());
}

absl::StatusOr<TrainResult> RunTrainMst(const ParsedArgs& args) {
  v1::Release release;
  if (args.Has("release")) {
    DPC_RETURN_IF_ERROR(ReadProtoFile(args.Get("release"), &release));
  } else if (args.Has("dataset")) {
    if (!args.Has("epsilon")) {
      return absl::InvalidArgumentError(
          "train mst --dataset needs --epsilon (the MST release's target epsilon)");
    }
    DPC_ASSIGN_OR_RETURN(const double epsilon, args.GetDouble("epsilon"));
    DPC_ASSIGN_OR_RETURN(Connection connection, Connection::FromArgs(args));
    const std::string key = args.Has("key") ? args.Get("key") : NewIdempotencyKey();
    // A dataset name is accepted where its id is (issue 25 item 2).
    DPC_ASSIGN_OR_RETURN(const std::string dataset_id,
                         ResolveDatasetId(&connection, args.Get("dataset")));
    DPC_ASSIGN_OR_RETURN(release, RequestMstRelease(connection, dataset_id, epsilon, key));
    if (args.Has("release-out")) {
      DPC_RETURN_IF_ERROR(WriteProtoFile(release, args.Get("release-out")));
    }
    // Under --json (train's own flag) stdout holds the JSON alone.
    std::fprintf(args.Flag("json") ? stderr : stdout,
                 "released %s (mst): epsilon %.4f; dataset spent %.4f, remaining %.4f (key %s)\n",
                 release.id().c_str(), release.mst().epsilon(), release.epsilon_spent_total(),
                 release.epsilon_remaining(), key.c_str());
  } else {
    return absl::InvalidArgumentError(
        "train mst needs --release FILE (an mst release) or --dataset ds_... --epsilon E");
  }
  TrainResult result;
  DPC_ASSIGN_OR_RETURN(result.model, TrainMstModel(release));
  result.message = absl::StrFormat("mst model (%d columns, tree of %d edges) written to %s\n",
                                   result.model.mst_domain_sizes_size(),
                                   result.model.mst_edges_size(), args.Get("out"));
  if (auto warning = MstLabelWarning(release)) absl::StrAppend(&result.message, *warning, "\n");
  return result;
}

class MstUnit final : public Method {
 public:
  MethodId id() const override { return MethodId::kMst; }
  absl::string_view name() const override { return kMstName; }
  absl::string_view title() const override { return "MST"; }

  std::string TrainSummary() const override {
    return "fit MST's tree model to an mst release, or release and fit in one command";
  }
  std::string TrainDescription() const override {
    return "MST (McKenna, Miklau, Sheldon 2021): the server releases noisy 1-way marginals, a\n"
           "private maximum spanning tree of column pairs and their noisy 2-way marginals\n"
           "(docs/privacy.md 2.11); the client fits a tree-structured graphical model to them\n"
           "(no further budget). Numeric columns use the schema's bins and atoms.\n\n"
           "  dpcurator train mst --release mst.release --out mst.model\n"
           "  dpcurator train mst --dataset ds_... --epsilon 1 --out mst.model";
  }
  std::vector<v1::ReleaseKind> ReleaseKinds() const override { return {v1::MST}; }

  std::vector<OptionSpec> TrainOptions() const override {
    return WithConnection(
        {{"release", "", "an mst release file (dpcurator release --kind mst)"},
         {"dataset", "", "release from this dataset (id or name) first (needs --epsilon)"},
         {"epsilon", "", "target epsilon of the mst release (with --dataset)"},
         {"key", "", "idempotency key of the release (default: fresh)"},
         {"release-out", "", "also write the release artefact here (with --dataset)"},
         {"out", "model.pb", "model file to write"}});
  }
  absl::StatusOr<TrainResult> Train(const ParsedArgs& args) const override {
    return RunTrainMst(args);
  }

  // One release (marginals + private tree), then the client-side fit.
  absl::StatusOr<DemoOutput> TrainInDemo(const DemoInput& input) const override {
    const auto start = std::chrono::steady_clock::now();
    DemoOutput out;
    DPC_ASSIGN_OR_RETURN(out.release, RequestMstRelease(*input.analyst, input.dataset_id,
                                                        input.epsilon, NewIdempotencyKey()));
    out.release_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    input.say(absl::StrFormat(
        "analyst: mst release %s (%d columns, tree of %d edges, epsilon %.4f) in %.2fs",
        out.release.id(), out.release.mst().domain_sizes_size(), out.release.mst().edges_size(),
        out.release.mst().epsilon(), out.release_seconds));
    DPC_ASSIGN_OR_RETURN(out.model, TrainMstModel(out.release));
    if (auto warning = MstLabelWarning(out.release)) input.say(*warning);
    return out;
  }

  absl::StatusOr<data::Table> SampleTable(const v1::GeneratorModel& model, int64_t num_rows,
                                          uint64_t seed) const override {
    return SampleMstModel(model, num_rows, seed);
  }
};

}  // namespace

const Method& MstMethod() {
  static const MstUnit* const unit = new MstUnit();
  return *unit;
}

absl::StatusOr<v1::Release> RequestMstRelease(Connection& analyst, const std::string& dataset_id,
                                              double epsilon, const std::string& key) {
  v1::ReleaseRequest request;
  request.set_dataset_id(dataset_id);
  request.set_idempotency_key(key);
  request.set_epsilon(epsilon);
  request.mutable_mst();
  v1::Release release;
  auto context = analyst.NewContext();
  const grpc::Status status = analyst.releases().RequestRelease(context.get(), request, &release);
  if (!status.ok()) {
    return ReleaseRpcError(status, "mst release", key);
  }
  return release;
}

absl::StatusOr<v1::GeneratorModel> TrainMstModel(const v1::Release& release) {
  if (!release.has_mst()) {
    return absl::InvalidArgumentError(
        "train mst needs an mst release (dpcurator release --kind mst); this file holds "
        "another kind");
  }
  const v1::MstArtefact& artefact = release.mst();
  if (artefact.format_version() != 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "mst release format ", artefact.format_version(), " is not supported (this client "
        "reads 1); upgrade dpcurator"));
  }
  DPC_RETURN_IF_ERROR(CheckArtefact(artefact));
  std::vector<int> sizes(artefact.domain_sizes().begin(), artefact.domain_sizes().end());
  std::vector<release::NoisyMarginal> one_way, two_way;
  for (const auto& t : artefact.one_way()) one_way.push_back(NoisyMarginalFromProto(t));
  for (const auto& t : artefact.two_way()) two_way.push_back(NoisyMarginalFromProto(t));
  DPC_ASSIGN_OR_RETURN(const train::TreeModel tree, train::FitTreeModel(sizes, one_way, two_way));
  const ModelSource source{artefact.schema(), artefact.schema_fingerprint(), artefact.epsilon(),
                           artefact.delta()};
  v1::GeneratorModel model =
      PackageModel(kMstName, source, {}, nn::Activation::kRelu, Eigen::VectorXd(), 0, 0.0);
  model.set_release_id(release.id());
  model.set_dataset_id(release.dataset_id());
  PutTreeModel(tree, &model);
  return model;
}

void PutTreeModel(const train::TreeModel& tree, v1::GeneratorModel* model) {
  for (const int s : tree.domain_sizes) model->add_mst_domain_sizes(s);
  for (const auto& node : tree.nodes) {
    model->mutable_mst_nodes()->Add(node.data(), node.data() + node.size());
  }
  for (size_t e = 0; e < tree.edges.size(); ++e) {
    v1::MstEdge& edge = *model->add_mst_edges();
    edge.set_first(tree.edges[e].first);
    edge.set_second(tree.edges[e].second);
    // Row-major: the first column's codes index rows.
    const Eigen::MatrixXd& table = tree.tables[e];
    for (Eigen::Index a = 0; a < table.rows(); ++a) {
      for (Eigen::Index b = 0; b < table.cols(); ++b) model->add_mst_tables(table(a, b));
    }
  }
  model->set_mst_total(tree.total);
}

absl::StatusOr<data::Table> SampleMstModel(const v1::GeneratorModel& model, int64_t num_rows,
                                           uint64_t seed) {
  const absl::Status corrupt = absl::DataLossError(
      absl::StrCat("the ", model.method(), " model file does not rebuild (its tables do not "
                   "match its domain); retrain it with `dpcurator train ", model.method(), "`"));
  DPC_ASSIGN_OR_RETURN(const data::Schema schema, SchemaFromProto(model.schema()));
  DPC_ASSIGN_OR_RETURN(const data::Discretizer domain, data::Discretizer::Create(schema));
  train::TreeModel tree;
  tree.domain_sizes.assign(model.mst_domain_sizes().begin(), model.mst_domain_sizes().end());
  const int n = static_cast<int>(tree.domain_sizes.size());
  if (n != domain.num_columns()) return corrupt;
  int64_t offset = 0;
  for (int c = 0; c < n; ++c) {
    if (tree.domain_sizes[c] != domain.domain_size(c) ||
        offset + tree.domain_sizes[c] > model.mst_nodes_size()) {
      return corrupt;
    }
    tree.nodes.push_back(
        Eigen::Map<const Eigen::VectorXd>(model.mst_nodes().data() + offset, tree.domain_sizes[c]));
    offset += tree.domain_sizes[c];
  }
  if (offset != model.mst_nodes_size()) return corrupt;
  offset = 0;
  for (const v1::MstEdge& edge : model.mst_edges()) {
    const int i = edge.first(), j = edge.second();
    if (i < 0 || i >= n || j < 0 || j >= n || i == j) return corrupt;
    const int64_t cells = int64_t{tree.domain_sizes[i]} * tree.domain_sizes[j];
    if (offset + cells > model.mst_tables_size()) return corrupt;
    Eigen::MatrixXd table(tree.domain_sizes[i], tree.domain_sizes[j]);
    for (Eigen::Index a = 0; a < table.rows(); ++a) {
      for (Eigen::Index b = 0; b < table.cols(); ++b) table(a, b) = model.mst_tables(offset++);
    }
    tree.edges.emplace_back(i, j);
    tree.tables.push_back(std::move(table));
  }
  if (offset != model.mst_tables_size()) return corrupt;
  tree.total = model.mst_total();
  // Two public streams: the tree's codes, then the within-bin draws.
  return domain.Decode(train::SampleTreeModel(tree, num_rows, seed), seed ^ 0x9e3779b97f4a7c15ULL);
}

}  // namespace dpcurator::client
