// TLS: a token call over TLS succeeds; with --tls-client-ca the server
// refuses clients without a certificate signed by that CA, whatever their
// token. Certificates are made at test time by the openssl command-line
// tool (EC P-256, valid two days); the test is skipped where it is missing.

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "client/cli.h"
#include "client/connection.h"
#include "tests/server/server_test_util.h"

namespace dpcurator::server::testing {
namespace {

bool HaveOpenssl() { return std::system("openssl version > /dev/null 2>&1") == 0; }

// A CA, a server certificate for 127.0.0.1 / localhost, a client
// certificate from the same CA, and one from an unrelated CA.
bool MakeCertificates(const std::string& dir) {
  {
    std::ofstream(dir + "/server.ext") << "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                          "basicConstraints=CA:FALSE\n"
                                          "extendedKeyUsage=serverAuth\n";
    std::ofstream(dir + "/client.ext") << "basicConstraints=CA:FALSE\n"
                                          "extendedKeyUsage=clientAuth\n";
  }
  const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::string script = absl::StrCat(
      "(cd '", dir, "' && ",
      "openssl req -x509 ", key, " -keyout ca.key -out ca.pem -days 2 -subj /CN=dpc-test-ca && ",
      "openssl req -x509 ", key,
      " -keyout other-ca.key -out other-ca.pem -days 2 -subj /CN=dpc-other-ca && ",
      "openssl req ", key, " -keyout server.key -out server.csr -subj /CN=localhost && ",
      "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
      "-extfile server.ext -out server.pem && ",
      "openssl req ", key, " -keyout client.key -out client.csr -subj /CN=dpc-test-client && ",
      "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
      "-extfile client.ext -out client.pem && ",
      "openssl req ", key, " -keyout stranger.key -out stranger.csr -subj /CN=stranger && ",
      "openssl x509 -req -in stranger.csr -CA other-ca.pem -CAkey other-ca.key "
      "-CAcreateserial -days 2 -extfile client.ext -out stranger.pem) > '", dir,
      "/openssl.log' 2>&1");
  return std::system(script.c_str()) == 0;
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // scripts/dev.sh installs the openssl package; never skip in CI.
    ASSERT_TRUE(HaveOpenssl()) << "the openssl command-line tool is missing: run scripts/dev.sh test";
    dir_ = std::make_unique<TempDir>();
    ASSERT_TRUE(MakeCertificates(dir_->path())) << "see " << dir_->File("openssl.log");
    std::ofstream(dir_->File("tokens.txt")) << "curator " << kCuratorToken << "\n";
  }

  void Start(bool require_client_certificates) {
    ServerOptions options;
    options.db_path = dir_->File("curator.db");
    options.listen_address = "127.0.0.1:0";
    options.tokens_path = dir_->File("tokens.txt");
    options.tls_cert_path = dir_->File("server.pem");
    options.tls_key_path = dir_->File("server.key");
    if (require_client_certificates) options.tls_client_ca_path = dir_->File("ca.pem");
    auto started = CuratorServer::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
  }

  // ListDatasets through the client's own option handling.
  grpc::Status ListDatasets(std::vector<std::string> args) {
    args.insert(args.end(), {"--server", absl::StrCat("127.0.0.1:", server_->port()), "--token",
                             kCuratorToken, "--deadline", "10"});
    auto parsed = client::ParseArgs(client::ConnectionOptions(), args);
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    if (!parsed.ok()) return grpc::Status(grpc::StatusCode::INTERNAL, "bad arguments");
    auto connection = client::Connection::FromArgs(*parsed);
    EXPECT_TRUE(connection.ok()) << connection.status();
    if (!connection.ok()) return grpc::Status(grpc::StatusCode::INTERNAL, "no connection");
    auto context = connection->NewContext();
    v1::ListDatasetsResponse response;
    return connection->datasets().ListDatasets(context.get(), v1::ListDatasetsRequest(),
                                               &response);
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(std::chrono::milliseconds(200));
    server_.reset();
  }

  std::unique_ptr<TempDir> dir_;
  std::unique_ptr<CuratorServer> server_;
};

TEST_F(TlsTest, TokenCallOverTlsSucceedsAndPlaintextFails) {
  Start(/*require_client_certificates=*/false);
  grpc::Status status = ListDatasets({"--tls-ca", dir_->File("ca.pem")});
  EXPECT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
  EXPECT_FALSE(ListDatasets({"--insecure"}).ok());
  // A server certificate from a CA the client does not trust.
  EXPECT_FALSE(ListDatasets({"--tls-ca", dir_->File("other-ca.pem")}).ok());
}

TEST_F(TlsTest, ClientCertificatesAreRequiredWhenAClientCaIsSet) {
  Start(/*require_client_certificates=*/true);
  grpc::Status without = ListDatasets({"--tls-ca", dir_->File("ca.pem")});
  EXPECT_FALSE(without.ok());
  EXPECT_NE(without.error_code(), grpc::StatusCode::UNAUTHENTICATED)
      << "refused by the handshake, before any token is looked at";
  grpc::Status stranger =
      ListDatasets({"--tls-ca", dir_->File("ca.pem"), "--tls-cert", dir_->File("stranger.pem"),
                    "--tls-key", dir_->File("stranger.key")});
  EXPECT_FALSE(stranger.ok());
  grpc::Status with =
      ListDatasets({"--tls-ca", dir_->File("ca.pem"), "--tls-cert", dir_->File("client.pem"),
                    "--tls-key", dir_->File("client.key")});
  EXPECT_TRUE(with.ok()) << with.error_code() << " " << with.error_message();
}

TEST(TlsOptionsTest, ClientCaWithoutServerTlsIsRefused) {
  TempDir dir;
  ServerOptions options;
  options.db_path = dir.File("curator.db");
  options.listen_address = "127.0.0.1:0";
  options.insecure_dev = true;
  options.tls_client_ca_path = dir.File("ca.pem");
  auto started = CuratorServer::Start(options);
  ASSERT_FALSE(started.ok());
  EXPECT_NE(std::string(started.status().message()).find("--tls-client-ca"), std::string::npos);
}

}  // namespace
}  // namespace dpcurator::server::testing
