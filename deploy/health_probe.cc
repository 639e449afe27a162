// dpcurator-health-probe: a tiny grpc.health.v1 client for container
// HEALTHCHECKs, with grpc_health_probe's exit codes: 0 SERVING, 1 bad
// arguments, 2 connection failure, 3 RPC failure, 4 unhealthy.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "health.grpc.pb.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitBadArguments = 1;
constexpr int kExitConnectionFailure = 2;
constexpr int kExitRpcFailure = 3;
constexpr int kExitUnhealthy = 4;

void Usage() {
  std::fprintf(stderr,
               "usage: dpcurator-health-probe --addr host:port [--service NAME] "
               "[--timeout-ms 1000] [--plaintext | --tls-ca ca.pem]\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string address, service, ca_path;
  int timeout_ms = 1000;
  bool plaintext = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    std::string number;
    if (arg == "--addr" && value(&address)) continue;
    if (arg == "--service" && value(&service)) continue;
    if (arg == "--tls-ca" && value(&ca_path)) continue;
    if (arg == "--timeout-ms" && value(&number)) {
      timeout_ms = std::atoi(number.c_str());
      continue;
    }
    if (arg == "--plaintext") {
      plaintext = true;
      continue;
    }
    Usage();
    return kExitBadArguments;
  }
  if (address.empty() || timeout_ms <= 0) {
    Usage();
    return kExitBadArguments;
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (plaintext) {
    credentials = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    if (!ca_path.empty()) {
      std::ifstream input(ca_path);
      std::stringstream buffer;
      buffer << input.rdbuf();
      ssl.pem_root_certs = buffer.str();
    }
    credentials = grpc::SslCredentials(ssl);
  }
  auto channel = grpc::CreateChannel(address, credentials);
  const auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms);
  if (!channel->WaitForConnected(deadline)) {
    std::fprintf(stderr, "error: cannot connect to %s within %d ms\n", address.c_str(), timeout_ms);
    return kExitConnectionFailure;
  }
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(deadline);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) {
    std::fprintf(stderr, "error: health rpc failed: %s\n", status.error_message().c_str());
    return kExitRpcFailure;
  }
  if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    std::fprintf(stderr, "service unhealthy (status %d)\n", static_cast<int>(response.status()));
    return kExitUnhealthy;
  }
  std::printf("status: SERVING\n");
  return kExitOk;
}
