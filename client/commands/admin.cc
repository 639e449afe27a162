// Curator commands: bearer tokens (create, revoke, list) and the audit log.
#include <cstdio>
#include <ctime>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/commands.h"
#include "client/connection.h"
#include "client/printable.h"
#include "proto/convert.h"

namespace dpcurator::client {
namespace {

std::string RoleText(v1::Role role) {
  const std::string name = RoleProtoName(role);
  return name.empty() ? "?" : name;
}

std::string TimeText(int64_t unix_seconds) {
  if (unix_seconds == 0) return "-";
  char text[32];
  std::time_t t = unix_seconds;
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", std::gmtime(&t));
  return text;
}

nlohmann::json TokenJson(const v1::TokenInfo& info) {
  return {{"token_id", info.token_id()},       {"role", RoleText(info.role())},
          {"label", info.label()},             {"created_unix", info.created_unix()},
          {"created_by", info.created_by()},   {"revoked_unix", info.revoked_unix()},
          {"revoked_by", info.revoked_by()}};
}

absl::Status RunTokenCreate(const ParsedArgs& args) {
  v1::CreateTokenRequest request;
  const std::string role = args.Get("role");
  if (role == "curator") {
    request.set_role(v1::ROLE_CURATOR);
  } else if (role == "analyst") {
    request.set_role(v1::ROLE_ANALYST);
  } else if (role == "device") {
    request.set_role(v1::ROLE_DEVICE);
  } else {
    return 
        absl::InvalidArgumentError("--role must be curator, analyst or device");
  }
  request.set_label(args.Get("label"));
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  v1::CreateTokenResponse response;
  auto context = connection->NewContext();
  grpc::Status status = connection->admin().CreateToken(context.get(), request, &response);
  if (!status.ok()) return RpcError(status, "create token");
  if (args.Flag("json")) {
    nlohmann::json out = TokenJson(response.info());
    out["token"] = response.token();
    std::printf("%s\n", out.dump(2).c_str());
    return absl::OkStatus();
  }
  std::printf("created %s token %s%s\n", RoleText(response.info().role()).c_str(),
              Printable(response.info().token_id()).c_str(),
              response.info().label().empty()
                  ? ""
                  : absl::StrCat(" (", Printable(response.info().label()), ")").c_str());
  std::printf("\n  %s\n\n", response.token().c_str());
  std::printf(
      "This is the only time the token is shown: the server keeps only its SHA-256 digest.\n"
      "Hand it over securely; its holder uses it as DPCURATOR_TOKEN or --token.\n");
  return absl::OkStatus();
}

absl::Status RunTokenRevoke(const ParsedArgs& args) {
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  v1::RevokeTokenRequest request;
  request.set_token_id(args.Get("id"));
  v1::TokenInfo info;
  auto context = connection->NewContext();
  grpc::Status status = connection->admin().RevokeToken(context.get(), request, &info);
  if (!status.ok()) return RpcError(status, "revoke token");
  if (args.Flag("json")) {
    std::printf("%s\n", TokenJson(info).dump(2).c_str());
  } else {
    std::printf("revoked %s token %s at %s UTC; calls with it are refused from now on\n",
                RoleText(info.role()).c_str(), Printable(info.token_id()).c_str(),
                TimeText(info.revoked_unix()).c_str());
  }
  return absl::OkStatus();
}

absl::Status RunTokenList(const ParsedArgs& args) {
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  v1::ListTokensRequest request;
  request.set_include_revoked(args.Flag("all"));
  v1::ListTokensResponse response;
  auto context = connection->NewContext();
  grpc::Status status = connection->admin().ListTokens(context.get(), request, &response);
  if (!status.ok()) return RpcError(status, "list tokens");
  if (args.Flag("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& info : response.tokens()) out.push_back(TokenJson(info));
    std::printf("%s\n", out.dump(2).c_str());
    return absl::OkStatus();
  }
  std::printf("%-38s %-8s %-20s %-20s %-38s %s\n", "token id", "role", "created (UTC)",
              "revoked (UTC)", "created by", "label");
  for (const auto& info : response.tokens()) {
    std::printf("%-38s %-8s %-20s %-20s %-38s %s\n", Printable(info.token_id()).c_str(),
                RoleText(info.role()).c_str(), TimeText(info.created_unix()).c_str(),
                TimeText(info.revoked_unix()).c_str(),
                info.created_by().empty() ? "-" : Printable(info.created_by()).c_str(),
                Printable(info.label()).c_str());
  }
  return absl::OkStatus();
}

// Each row's epsilon is that call's charge alone; charges on one dataset
// compose (RDP) to less than their sum, so summing the column overstates
// what was spent. Under the rows: per dataset charged in these rows, the
// ledger's composed figure (GetBudget), and per principal the sum of its own
// charges there beside it. The ledger composes per dataset, not per person:
// a person's share of the composed figure is not defined, so the sum is
// shown as what it is, an upper bound.
void PrintComposedEpsilon(Connection* connection, const std::vector<v1::AuditRecord>& records) {
  std::map<std::string, std::map<std::string, double>> charged;  // dataset -> principal -> sum
  for (const auto& r : records) {
    if (r.epsilon() > 0 && r.code() == 0 && absl::StartsWith(r.target(), "ds_")) {
      charged[r.target()][r.principal()] += r.epsilon();
    }
  }
  if (charged.empty()) return;
  std::printf("\nepsilon by dataset (the ledger composes a dataset's charges: its figure is what "
              "was spent;\nthe per-principal sums of these rows are upper bounds, not "
              "shares)\n");
  std::printf("  %-38s  %12s  %-38s  %10s\n", "dataset", "composed", "principal", "sum alone");
  for (const auto& [dataset, principals] : charged) {
    v1::GetBudgetRequest request;
    request.set_dataset_id(dataset);
    v1::BudgetReport report;
    auto context = connection->NewContext();
    grpc::Status status = connection->datasets().GetBudget(context.get(), request, &report);
    const std::string composed =
        status.ok() ? absl::StrFormat("%.4f", report.epsilon_spent()) : std::string("?");
    bool first = true;
    for (const auto& [principal, sum] : principals) {
      std::printf("  %-38s  %12s  %-38s  %10.4f\n", first ? Printable(dataset).c_str() : "",
                  first ? composed.c_str() : "", Printable(principal).c_str(), sum);
      first = false;
    }
  }
}

absl::Status RunAudit(const ParsedArgs& args) {
  auto limit = args.GetInt("limit");
  if (!limit.ok()) return limit.status();
  if (*limit <= 0 || *limit > 10000) {
    return absl::InvalidArgumentError("--limit must be between 1 and 10000");
  }
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  // Pages of at most about 1 MiB (server/paging.h) until --limit records.
  auto records = ListNewestAudit(&*connection, static_cast<int>(*limit));
  if (!records.ok()) return records.status();
  if (args.Flag("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : *records) {
      out.push_back({{"id", r.id()},
                     {"created_unix", r.created_unix()},
                     {"principal", r.principal()},
                     {"role", r.role() == v1::ROLE_UNSPECIFIED ? "" : RoleText(r.role())},
                     {"method", r.method()},
                     {"target", r.target()},
                     {"code", r.code()},
                     {"epsilon", r.epsilon()},
                     {"detail", r.detail()}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return absl::OkStatus();
  }
  // Oldest of the page first, like a log. Every text column is caller
  // text or may hold it (a target is whatever id the caller sent): each is
  // escaped, so that no row can carry a terminal escape or a newline that
  // starts a forged row (issue 36, item 9).
  std::printf("%7s  %-19s  %-38s  %-8s  %-40s  %4s  %8s  %s\n", "id", "time (UTC)", "principal",
              "role", "method", "code", "epsilon", "target / detail");
  for (int i = static_cast<int>(records->size()) - 1; i >= 0; --i) {
    const auto& r = (*records)[static_cast<size_t>(i)];
    std::string method = r.method();
    if (!method.empty() && method[0] == '/') method = method.substr(1);
    if (method.rfind("dpcurator.v1.", 0) == 0) method = method.substr(13);
    std::printf("%7lld  %-19s  %-38s  %-8s  %-40s  %4d  %8.4f  %s%s%s\n",
                static_cast<long long>(r.id()), TimeText(r.created_unix()).c_str(),
                r.principal().empty() ? "(unauthenticated)" : Printable(r.principal()).c_str(),
                r.role() == v1::ROLE_UNSPECIFIED ? "-" : RoleText(r.role()).c_str(),
                Printable(method).c_str(), r.code(), r.epsilon(), Printable(r.target()).c_str(),
                r.detail().empty() ? "" : "  ", Printable(r.detail()).c_str());
  }
  PrintComposedEpsilon(&*connection, *records);
  return absl::OkStatus();
}

}  // namespace

std::vector<Command> AdminCommands() {
  std::vector<Command> commands;
  commands.push_back(Command{
      "admin token create", "make a bearer token for a role; shown once (curator)",
      "The token is 192 random bits with a 'dpc_' prefix. The server stores only its SHA-256\n"
      "digest, so it cannot be shown again: lost tokens are revoked and replaced.",
      WithConnection({{"role", "", "role of the token", false, true, "", {"curator", "analyst", "device"}},
                      {"label", "", "who or what holds it, e.g. 'alice laptop'"},
                      {"json", "", "print JSON (includes the token)", true}}),
      RunTokenCreate});
  commands.push_back(Command{
      "admin token revoke", "revoke a token by id; refused from the next call on (curator)",
      "Ids are listed by `dpcurator admin token list`. The last valid curator token cannot be\n"
      "revoked. Tokens from the server's --tokens file are revoked by editing that file.",
      WithConnection({{"id", "", "token id (tok_...)", false, true},
                      {"json", "", "print JSON", true}}),
      RunTokenRevoke});
  commands.push_back(Command{
      "admin token list", "list token ids, roles and labels (curator; never the tokens)", "",
      WithConnection({{"all", "", "include revoked tokens", true},
                      {"json", "", "print JSON", true}}),
      RunTokenList});
  commands.push_back(Command{
      "admin audit", "the audit log: who called what, when, and the epsilon charged (curator)",
      "One row per protected call (one per report stream), refused calls included; the code is\n"
      "the gRPC status (0 OK, 3 invalid, 5 not found, 7 permission denied, 8 budget\n"
      "exhausted or response too large, 16 unauthenticated). Calls refused for their token or\n"
      "role are one row per peer, method and code a minute, 'calls=N' counting the repeats.\n"
      "Text a caller sent is printed with control characters escaped (\\xNN, \\u{NNNN}).",
      WithConnection({{"limit", "50", "newest rows to show"}, {"json", "", "print JSON", true}}),
      RunAudit});
  return commands;
}

}  // namespace dpcurator::client
