// The AIM unit: `train aim` fits a model to an aim release (or releases and
// fits in one command), printing each round's selection and budget from the
// artefact; the demo does the same on its dataset; `sample` draws from the
// model file.
#include "client/methods/aim.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/methods/mst.h"
#include "client/model_package.h"
#include "client/proto_file.h"
#include "core/data/discretize.h"
#include "core/pgm/graphical_model.h"
#include "core/train/aim.h"
#include "core/train/mst.h"
#include "core/util/status_macros.h"
#include "proto/convert.h"
#include "proto/release_kinds.h"

namespace dpcurator::client {
namespace {

constexpr absl::string_view kAimName = "aim";

// Every table agrees with the artefact's own domain (a file edited or cut
// short is refused here, naming the table, before the fit indexes it).
absl::Status CheckTable(const v1::AimArtefact& artefact, const v1::NoisyMarginalTable& t,
                        const std::string& what) {
  const int n = artefact.domain_sizes_size();
  if (t.clique_size() != t.shape_size() || t.clique_size() == 0) {
    return absl::DataLossError(absl::StrCat("aim release: ", what, " has no consistent shape"));
  }
  int64_t cells = 1;
  for (int k = 0; k < t.clique_size(); ++k) {
    if (t.clique(k) < 0 || t.clique(k) >= n || t.shape(k) != artefact.domain_sizes(t.clique(k))) {
      return absl::DataLossError(
          absl::StrCat("aim release: ", what, " does not match the release's domain"));
    }
    cells *= t.shape(k);
  }
  if (cells != t.counts_size()) {
    return absl::DataLossError(absl::StrCat("aim release: ", what, " has ", t.counts_size(),
                                            " counts, its shape needs ", cells));
  }
  return absl::OkStatus();
}

}  // namespace

// "a,b;c,d,e" -> cliques of column names.
absl::StatusOr<v1::AimParams> AimParamsFromArgs(const ParsedArgs& args) {
  v1::AimParams params;
  if (args.Has("workload")) {
    for (absl::string_view clique :
         absl::StrSplit(args.Get("workload"), ';', absl::SkipWhitespace())) {
      v1::AimClique& named = *params.add_workload();
      for (absl::string_view column : absl::StrSplit(clique, ',', absl::SkipWhitespace())) {
        named.add_columns(std::string(absl::StripAsciiWhitespace(column)));
      }
    }
  }
  if (args.Has("max-model-cells")) {
    DPC_ASSIGN_OR_RETURN(const int64_t cells, args.GetInt("max-model-cells"));
    params.set_max_model_cells(cells);
  }
  if (args.Has("rounds")) {
    DPC_ASSIGN_OR_RETURN(const int64_t rounds, args.GetInt("rounds"));
    if (rounds < 0 || rounds > (int64_t{1} << 30)) {
      return absl::InvalidArgumentError("--rounds must be between 0 (the default) and 2^30");
    }
    params.set_rounds(static_cast<int32_t>(rounds));
  }
  return params;
}

namespace {

// --fit-iterations, --zero-below (train aim and the demo).
absl::StatusOr<AimFitOptions> FitOptionsFromArgs(const ParsedArgs& args) {
  AimFitOptions fit;
  if (args.Has("fit-iterations")) {
    DPC_ASSIGN_OR_RETURN(const int64_t iterations, args.GetInt("fit-iterations"));
    if (iterations < 1 || iterations > 100'000) {
      return absl::InvalidArgumentError("--fit-iterations must be between 1 and 100000");
    }
    fit.iterations = static_cast<int>(iterations);
  }
  if (args.Has("zero-below")) {
    DPC_ASSIGN_OR_RETURN(const double sigmas, args.GetDouble("zero-below"));
    if (!(sigmas >= 0.0 && sigmas <= 100.0)) {
      return absl::InvalidArgumentError(
          "--zero-below must be between 0 (off) and 100 (times the smallest noise std)");
    }
    fit.zero_below_sigmas = sigmas;
  }
  return fit;
}

std::vector<OptionSpec> FitOptionSpecs() {
  return {{"fit-iterations", "",
           absl::StrCat("mirror-descent iterations of the fit (default ",
                        train::kAimFinalFitIterations, ")")},
          {"zero-below", "",
           absl::StrCat("fix at 0 the cells of the measured tables' column pairs (not the "
                        "label's) fitted below this many times the smallest noise std, 0 for "
                        "none (default ",
                        train::kAimFinalFitZeroBelowSigmas, ")")}};
}

absl::StatusOr<TrainResult> RunTrainAim(const ParsedArgs& args) {
  // Under --json (train's own flag) stdout holds the JSON alone: the
  // release and round lines go to stderr, as mst's do.
  std::FILE* const progress = args.Flag("json") ? stderr : stdout;
  v1::Release release;
  if (args.Has("release")) {
    DPC_RETURN_IF_ERROR(ReadProtoFile(args.Get("release"), &release));
  } else if (args.Has("dataset")) {
    if (!args.Has("epsilon")) {
      return absl::InvalidArgumentError(
          "train aim --dataset needs --epsilon (the AIM release's target epsilon)");
    }
    DPC_ASSIGN_OR_RETURN(const double epsilon, args.GetDouble("epsilon"));
    DPC_ASSIGN_OR_RETURN(const v1::AimParams params, AimParamsFromArgs(args));
    DPC_ASSIGN_OR_RETURN(Connection connection, Connection::FromArgs(args));
    const std::string key = args.Has("key") ? args.Get("key") : NewIdempotencyKey();
    // A dataset's name is accepted where its id is (issue 25 item 2).
    DPC_ASSIGN_OR_RETURN(const std::string dataset_id,
                         ResolveDatasetId(&connection, args.Get("dataset")));
    DPC_ASSIGN_OR_RETURN(release, RequestAimRelease(connection, dataset_id, epsilon,
                                                    params, key));
    if (args.Has("release-out")) {
      DPC_RETURN_IF_ERROR(WriteProtoFile(release, args.Get("release-out")));
    }
    std::fprintf(progress, "released %s (aim): epsilon %.4f; dataset spent %.4f, remaining %.4f "
                 "(key %s)\n", release.id().c_str(), release.aim().epsilon(), release.epsilon_spent_total(),
                release.epsilon_remaining(), key.c_str());
  } else {
    return absl::InvalidArgumentError(
        "train aim needs --release FILE (an aim release) or --dataset ds_... --epsilon E");
  }
  if (release.has_aim()) {
    for (const std::string& line : AimProgressLines(release.aim())) {
      std::fprintf(progress, "%s\n", line.c_str());
    }
  }
  TrainResult result;
  DPC_ASSIGN_OR_RETURN(const AimFitOptions fit, FitOptionsFromArgs(args));
  DPC_ASSIGN_OR_RETURN(result.model, TrainAimModel(release, fit));
  // What AIM measured, not an MST edge count (issue 38: "0 of 8 rounds'
  // pairs in its tree" was always 0 for AIM).
  result.message = absl::StrCat(
      absl::StrFormat("aim model (%d columns, %d junction-tree cliques) written to %s\n",
                      result.model.mst_domain_sizes_size(), result.model.pgm_cliques_size(),
                      args.Get("out")),
      AimMeasuredSummary(release.aim()));
  return result;
}

class AimUnit final : public Method {
 public:
  MethodId id() const override { return MethodId::kAim; }
  absl::string_view name() const override { return kAimName; }
  absl::string_view title() const override { return "AIM"; }

  std::string TrainSummary() const override {
    return "fit a model to an aim release, or release and fit in one command";
  }
  std::string TrainDescription() const override {
    return "AIM (McKenna, Mullins, Sheldon, Miklau 2022): the server releases noisy 1-way\n"
           "marginals, then round after round selects the worst-fitted marginal of the\n"
           "workload privately and measures it, until the budget is spent (docs/privacy.md\n"
           "2.12); the client fits a graphical model to the measurements (no further budget)\n"
           "and prints each round's selection and budget used. Numeric columns use the\n"
           "schema's bins and atoms.\n\n"
           "  dpcurator train aim --dataset ds_... --epsilon 1 --out aim.model\n"
           "  dpcurator train aim --dataset ds_... --epsilon 1 --workload 'age,income;age,label'\n"
           "  dpcurator train aim --release aim.release --out aim.model";
  }
  std::vector<OptionSpec> TrainOptions() const override {
    return WithConnection(
        {{"release", "", "an aim release file (written by --release-out)"},
         {"dataset", "", "release from this dataset first (needs --epsilon)"},
         {"epsilon", "", "target epsilon of the aim release (with --dataset)"},
         {"workload", "",
          "cliques of 1 to 3 column names, 'a,b;c,d,e' (default: every pair, plus every triple "
          "with the label)"},
         {"max-model-cells", "", "model-size limit in clique-table cells (default 10,000,000)"},
         {"rounds", "", "T, which sets the first rounds' budget rho / T (default 16 x columns)"},
         {"key", "", "idempotency key of the release (default: fresh)"},
         {"release-out", "", "also write the release artefact here (with --dataset)"},
         {"out", "model.pb", "model file to write"},
         FitOptionSpecs()[0], FitOptionSpecs()[1]});
  }
  std::vector<OptionSpec> DemoOptions() const override { return FitOptionSpecs(); }
  absl::StatusOr<TrainResult> Train(const ParsedArgs& args) const override {
    return RunTrainAim(args);
  }

  absl::StatusOr<DemoOutput> TrainInDemo(const DemoInput& input) const override {
    const auto start = std::chrono::steady_clock::now();
    DemoOutput out;
    DPC_ASSIGN_OR_RETURN(out.release,
                         RequestAimRelease(*input.analyst, input.dataset_id, input.epsilon,
                                           v1::AimParams(), NewIdempotencyKey()));
    out.release_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    input.say(absl::StrFormat(
        "analyst: aim release %s (%d columns, %d rounds, epsilon %.4f) in %.2fs",
        out.release.id(), out.release.aim().domain_sizes_size(), out.release.aim().rounds_size(),
        out.release.aim().epsilon(), out.release_seconds));
    AimFitOptions fit;
    if (input.args != nullptr) {
      DPC_ASSIGN_OR_RETURN(fit, FitOptionsFromArgs(*input.args));
    }
    DPC_ASSIGN_OR_RETURN(out.model, TrainAimModel(out.release, fit));
    for (absl::string_view line :
         absl::StrSplit(AimMeasuredSummary(out.release.aim()), '\n', absl::SkipEmpty())) {
      input.say(std::string(line));
    }
    return out;
  }

  absl::StatusOr<data::Table> SampleTable(const v1::GeneratorModel& model, int64_t num_rows,
                                          uint64_t seed) const override {
    // The model file holds a graphical model (GeneratorModel field 45).
    return SampleAimModel(model, num_rows, seed);
  }
};

}  // namespace

const Method& AimMethod() {
  static const AimUnit* const unit = new AimUnit();
  return *unit;
}

std::string AimMeasuredSummary(const v1::AimArtefact& artefact) {
  const int n = artefact.schema().columns_size();
  int label = -1;
  for (int c = 0; c < n; ++c) {
    if (!artefact.schema().label().empty() &&
        artefact.schema().columns(c).name() == artefact.schema().label()) {
      label = c;
    }
  }
  int by_size[4] = {0, 0, 0, 0};
  int with_label = 0;
  for (const v1::AimRoundRecord& round : artefact.rounds()) {
    const auto& clique = round.measurement().clique();
    ++by_size[std::clamp(clique.size(), 0, 3)];
    if (clique.size() > 1 && label >= 0 &&
        std::find(clique.begin(), clique.end(), label) != clique.end()) {
      ++with_label;
    }
  }
  std::string text = absl::StrFormat(
      "aim measured: %d 1-way tables, then %d rounds: %d on 1-way, %d on 2-way, %d on 3-way "
      "tables",
      artefact.one_way_size(), artefact.rounds_size(), by_size[1], by_size[2], by_size[3]);
  if (label >= 0) {
    absl::StrAppendFormat(&text, "; %d with the label (%s)", with_label,
                          artefact.schema().label());
  }
  absl::StrAppend(&text, "\n");
  if (label >= 0 && with_label == 0) {
    absl::StrAppendFormat(
        &text,
        "warning: no round measured the label (%s) with a feature, so the model's rows carry "
        "no relation between the label and any other column; a classifier trained on them "
        "predicts no better than chance. Release again at a larger epsilon, or name label "
        "pairs with --workload\n",
        artefact.schema().label());
  }
  if (label >= 0) {
    if (auto warning = LabelRowsWarning("aim", EstimatedRows(artefact.one_way()),
                                        artefact.epsilon())) {
      absl::StrAppend(&text, *warning, "\n");
    }
  }
  return text;
}

absl::StatusOr<v1::Release> RequestAimRelease(Connection& analyst, const std::string& dataset_id,
                                              double epsilon, const v1::AimParams& params,
                                              const std::string& key) {
  v1::ReleaseRequest request;
  request.set_dataset_id(dataset_id);
  request.set_idempotency_key(key);
  request.set_epsilon(epsilon);
  *request.mutable_aim() = params;
  v1::Release release;
  auto context = analyst.NewContext();
  const grpc::Status status = analyst.releases().RequestRelease(context.get(), request, &release);
  if (!status.ok()) {
    return ReleaseRpcError(status, "aim release", key);
  }
  return release;
}

std::vector<std::string> AimProgressLines(const v1::AimArtefact& artefact) {
  std::vector<std::string> lines;
  const int n = artefact.schema().columns_size();
  auto name = [&](int c) {
    return c >= 0 && c < n ? artefact.schema().columns(c).name() : absl::StrCat("#", c);
  };
  lines.push_back(absl::StrFormat("aim: %d 1-way marginals (noise multiplier %.4g), rho %.6g",
                                  artefact.one_way_size(), artefact.one_way_noise_multiplier(),
                                  artefact.rho()));
  for (int r = 0; r < artefact.rounds_size(); ++r) {
    const v1::AimRoundRecord& round = artefact.rounds(r);
    std::vector<std::string> columns;
    for (int c : round.measurement().clique()) columns.push_back(name(c));
    lines.push_back(absl::StrFormat(
        "round %3d: (%s)  sigma %.4g  eps_sel %.4g  rho used %.6g of %.6g (%.1f%%)%s", r + 1,
        absl::StrJoin(columns, ", "), round.measurement().noise_std(), round.selection_epsilon(),
        round.rho_used(), artefact.rho(),
        artefact.rho() > 0 ? 100.0 * round.rho_used() / artefact.rho() : 0.0,
        round.annealed() ? "  annealed" : ""));
  }
  return lines;
}

absl::StatusOr<v1::GeneratorModel> TrainAimModel(const v1::Release& release,
                                                 const AimFitOptions& fit) {
  if (!release.has_aim()) {
    return absl::InvalidArgumentError(
        "train aim needs an aim release (dpcurator train aim --release-out); this file holds "
        "another kind");
  }
  const v1::AimArtefact& artefact = release.aim();
  if (artefact.format_version() != 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "aim release format ", artefact.format_version(), " is not supported (this client "
        "reads 1); upgrade dpcurator"));
  }
  for (int i = 0; i < artefact.one_way_size(); ++i) {
    DPC_RETURN_IF_ERROR(
        CheckTable(artefact, artefact.one_way(i), absl::StrCat("1-way table ", i)));
  }
  for (int i = 0; i < artefact.rounds_size(); ++i) {
    DPC_RETURN_IF_ERROR(CheckTable(artefact, artefact.rounds(i).measurement(),
                                   absl::StrCat("round ", i + 1, "'s table")));
  }
  const std::vector<int> sizes(artefact.domain_sizes().begin(), artefact.domain_sizes().end());
  // The fit (post-processing, AIM Alg. 2's last line): Private-PGM over every
  // released measurement, the 1-way tables and each round's, with
  // AimFitOptions' iterations of mirror descent (kAimFinalFitIterations
  // unless --fit-iterations) and zero threshold. The junction tree is at
  // most the recipe's model-size limit, which the server's size filter kept.
  std::vector<release::NoisyMarginal> measurements;
  for (const auto& t : artefact.one_way()) measurements.push_back(NoisyMarginalFromProto(t));
  for (const v1::AimRoundRecord& round : artefact.rounds()) {
    measurements.push_back(NoisyMarginalFromProto(round.measurement()));
  }
  pgm::EstimateOptions options;
  options.iterations = fit.iterations;
  options.zero_below_sigmas = fit.zero_below_sigmas;
  // The zero rule leaves the label's pairs alone (train::kAimFinalFitZeroBelowSigmas).
  DPC_ASSIGN_OR_RETURN(const data::Schema fit_schema, SchemaFromProto(artefact.schema()));
  if (fit_schema.label_index().has_value()) {
    options.zero_exempt_attribute = *fit_schema.label_index();
  }
  // The limit the server's size filter kept the measured cliques' junction
  // tree within (the request's, recorded in the artefact).
  options.max_cells = artefact.max_model_cells() > 0 ? artefact.max_model_cells()
                                                     : train::kDefaultAimMaxModelCells;
  DPC_ASSIGN_OR_RETURN(const pgm::GraphicalModel fitted,
                       pgm::GraphicalModel::Estimate(sizes, measurements, options));
  const ModelSource source{artefact.schema(), artefact.schema_fingerprint(), artefact.epsilon(),
                           artefact.delta()};
  v1::GeneratorModel model =
      PackageModel(kAimName, source, {}, nn::Activation::kRelu, Eigen::VectorXd(), 0, 0.0);
  model.set_release_id(release.id());
  model.set_dataset_id(release.dataset_id());
  for (const int size : sizes) model.add_mst_domain_sizes(size);
  for (size_t c = 0; c < fitted.cliques().size(); ++c) {
    v1::PgmClique& clique = *model.add_pgm_cliques();
    clique.mutable_columns()->Add(fitted.cliques()[c].begin(), fitted.cliques()[c].end());
    clique.set_parent(fitted.parents()[c]);
    const Eigen::VectorXd& marginal = fitted.clique_marginal(static_cast<int>(c));
    clique.mutable_marginal()->Add(marginal.data(), marginal.data() + marginal.size());
  }
  return model;
}

absl::StatusOr<data::Table> SampleAimModel(const v1::GeneratorModel& model, int64_t num_rows,
                                           uint64_t seed) {
  DPC_ASSIGN_OR_RETURN(const data::Schema schema, SchemaFromProto(model.schema()));
  DPC_ASSIGN_OR_RETURN(const data::Discretizer domain, data::Discretizer::Create(schema));
  std::vector<int> sizes(model.mst_domain_sizes().begin(), model.mst_domain_sizes().end());
  std::vector<std::vector<int>> cliques;
  std::vector<int> parents;
  std::vector<Eigen::VectorXd> marginals;
  for (const v1::PgmClique& clique : model.pgm_cliques()) {
    cliques.emplace_back(clique.columns().begin(), clique.columns().end());
    parents.push_back(clique.parent());
    marginals.push_back(
        Eigen::Map<const Eigen::VectorXd>(clique.marginal().data(), clique.marginal_size()));
  }
  bool matches = static_cast<int>(sizes.size()) == domain.num_columns();
  for (int c = 0; matches && c < domain.num_columns(); ++c) {
    matches = sizes[c] == domain.domain_size(c);
  }
  absl::StatusOr<pgm::GraphicalModel> rebuilt =
      pgm::GraphicalModel::FromParts(std::move(sizes), std::move(cliques), std::move(parents),
                                     std::move(marginals));
  if (!matches || !rebuilt.ok()) {
    return absl::DataLossError(
        "the aim model file does not rebuild (its graphical model does not match its schema's "
        "domain); retrain it with `dpcurator train aim`");
  }
  // Two public streams: the model's codes, then the within-bin draws (as mst).
  return domain.Decode(rebuilt->Sample(num_rows, seed), seed ^ 0x9e3779b97f4a7c15ULL);
}

}  // namespace dpcurator::client
