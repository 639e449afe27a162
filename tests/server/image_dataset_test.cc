// Image datasets end to end on a real server (issue 14, item 1): an IMAGE
// schema column, batches of 8-bit pixels stored compactly, each batch stored
// whole or not at all with a refusal that names the message and the image,
// the sealed-rows cache, and rff_embedding / charfn_embedding releases over
// the pixels with the papers' length-scale as the declared default.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/data/encoder.h"
#include "core/util/public_rng.h"
#include "proto/convert.h"
#include "tests/server/server_test_util.h"

namespace dpcurator::server::testing {
namespace {

using ::testing::HasSubstr;

constexpr int kSide = 28;
constexpr int kPixels = kSide * kSide;
constexpr int kClasses = 10;

v1::TableSchema ImageSchemaProto(int height = kSide, int width = kSide) {
  v1::TableSchema schema;
  auto* image = schema.add_columns();
  image->set_name("pixels");
  image->set_type(v1::ColumnSchema::IMAGE);
  image->mutable_image()->set_height(height);
  image->mutable_image()->set_width(width);
  auto* label = schema.add_columns();
  label->set_name("label");
  label->set_type(v1::ColumnSchema::CATEGORICAL);
  for (int c = 0; c < kClasses; ++c) label->add_categories(std::to_string(c));
  schema.set_label("label");
  return schema;
}

// `count` images with pixels and labels drawn from `seed` (pixel levels
// spread over 0..255, labels over the classes).
struct Images {
  std::string pixels;
  std::vector<uint32_t> labels;
};
Images MakeImages(int count, uint64_t seed) {
  PublicRng rng(seed);
  Images images;
  images.pixels.resize(static_cast<size_t>(count) * kPixels);
  for (char& p : images.pixels) p = static_cast<char>(static_cast<uint8_t>(rng.Uniform() * 256));
  for (int i = 0; i < count; ++i) {
    images.labels.push_back(static_cast<uint32_t>(rng.Uniform() * kClasses));
  }
  return images;
}

class ImageDatasetTest : public ServerTest {
 protected:
  void SetUp() override {
    ServerTest::SetUp();
    v1::CreateDatasetRequest request;
    request.set_name("fashion");
    *request.mutable_schema() = ImageSchemaProto();
    request.mutable_budget()->set_epsilon(10.0);
    request.mutable_budget()->set_delta(1e-5);
    request.set_relation(v1::ADD_REMOVE);
    auto connection = Curator();
    auto context = connection.NewContext();
    grpc::Status status = connection.datasets().CreateDataset(context.get(), request, &dataset_);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  v1::UploadRowsRequest Batch(const Images& images, size_t first, size_t count) {
    v1::UploadRowsRequest message;
    message.set_dataset_id(dataset_.id());
    auto* batch = message.mutable_images();
    batch->set_count(static_cast<int>(count));
    batch->set_pixels(images.pixels.substr(first * kPixels, count * kPixels));
    for (size_t i = first; i < first + count; ++i) batch->add_label_levels(images.labels[i]);
    return message;
  }

  int64_t StoredRows() {
    v1::Dataset listed;
    EXPECT_TRUE(FindDataset(Curator(), dataset_.id(), &listed).ok());
    return listed.row_count();
  }

  data::Schema Schema() { return SchemaFromProto(dataset_.schema()).value(); }

  v1::Dataset dataset_;
};

TEST_F(ImageDatasetTest, SchemaKeepsTheDeclaredShape) {
  ASSERT_EQ(dataset_.schema().columns_size(), 2);
  EXPECT_EQ(dataset_.schema().columns(0).type(), v1::ColumnSchema::IMAGE);
  EXPECT_EQ(dataset_.schema().columns(0).image().height(), kSide);
  EXPECT_EQ(dataset_.schema().columns(0).image().width(), kSide);
  EXPECT_EQ(dataset_.schema().columns(0).image().channels(), 1);
  // The fingerprint covers the shape: a 32 x 32 schema is another schema.
  EXPECT_EQ(dataset_.schema_fingerprint(), Schema().FingerprintHex());
  EXPECT_NE(SchemaFromProto(ImageSchemaProto(32, 32))->FingerprintHex(),
            dataset_.schema_fingerprint());
}

TEST_F(ImageDatasetTest, RefusesAnImpossibleShapeAtCreation) {
  v1::CreateDatasetRequest request;
  request.set_name("too-big");
  *request.mutable_schema() = ImageSchemaProto(5000, 28);
  request.mutable_budget()->set_epsilon(1.0);
  request.mutable_budget()->set_delta(1e-5);
  auto connection = Curator();
  auto context = connection.NewContext();
  v1::Dataset dataset;
  grpc::Status status = connection.datasets().CreateDataset(context.get(), request, &dataset);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("[1, 4096]"));
}

TEST_F(ImageDatasetTest, BatchesAreStoredAsPixelLevels) {
  const Images images = MakeImages(250, 1);
  v1::UploadRowsResponse response;
  grpc::Status status =
      UploadMessages({Batch(images, 0, 100), Batch(images, 100, 100), Batch(images, 200, 50)},
                     &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.rows_accepted(), 250);
  EXPECT_EQ(response.total_rows(), 250);
  EXPECT_EQ(StoredRows(), 250);
  auto table = server_->store()->LoadRows(dataset_.id(), Schema());
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_EQ((*table)->num_rows(), 250);
  ASSERT_EQ((*table)->pixels.size(), images.pixels.size());
  EXPECT_TRUE(std::equal(images.pixels.begin(), images.pixels.end(), (*table)->pixels.begin(),
                         [](char a, uint8_t b) { return static_cast<uint8_t>(a) == b; }));
  for (int i = 0; i < 250; ++i) {
    ASSERT_EQ((*table)->cells(i, 1), images.labels[i]) << i;
  }
  auto integrity = server_->store()->CheckIntegrity();
  ASSERT_TRUE(integrity.ok());
  EXPECT_TRUE(integrity->empty());
}

// Issue 38: images already stored (pixels and label alike) are refused as
// repeated rows are, unless the upload says `append`.
TEST_F(ImageDatasetTest, ImagesAlreadyStoredAreRefusedUnlessAppend) {
  const Images images = MakeImages(30, 3);
  v1::UploadRowsResponse response;
  ASSERT_TRUE(UploadMessages({Batch(images, 0, 20)}, &response).ok());
  grpc::Status status = UploadMessages({Batch(images, 10, 20)}, &response);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << status.error_message();
  EXPECT_THAT(status.error_message(),
              HasSubstr("10 of the 20 rows of this upload repeat rows"));
  EXPECT_EQ(StoredRows(), 20);
  v1::UploadRowsRequest again = Batch(images, 10, 20);
  again.set_append(true);
  status = UploadMessages({again}, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(StoredRows(), 40);
}

TEST_F(ImageDatasetTest, BatchOfTheWrongLengthStoresNothingAndNamesTheMessage) {
  const Images images = MakeImages(30, 2);
  v1::UploadRowsRequest short_batch = Batch(images, 10, 20);
  short_batch.mutable_images()->mutable_pixels()->pop_back();
  v1::UploadRowsResponse response;
  grpc::Status status = UploadMessages({Batch(images, 0, 10), short_batch}, &response);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("upload message 1"));
  EXPECT_THAT(status.error_message(), HasSubstr("15679 pixel bytes"));
  EXPECT_THAT(status.error_message(), HasSubstr("exactly 15680"));
  EXPECT_THAT(status.error_message(), HasSubstr("Nothing of this upload was stored"));
  // An upload is one transaction (issue 25): the good batch before it is not
  // stored either, as for CSV rows.
  EXPECT_EQ(StoredRows(), 0);
  // Fewer labels than images is refused the same way.
  v1::UploadRowsRequest missing_label = Batch(images, 0, 5);
  missing_label.mutable_images()->mutable_label_levels()->RemoveLast();
  status = UploadMessages({missing_label}, &response);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("4 labels; it must carry 5"));
  EXPECT_EQ(StoredRows(), 0);
}

TEST_F(ImageDatasetTest, LabelOutOfRangeStoresNothingAndNamesTheImage) {
  const Images images = MakeImages(50, 3);
  v1::UploadRowsRequest batch = Batch(images, 0, 50);
  batch.mutable_images()->set_label_levels(37, kClasses);
  v1::UploadRowsResponse response;
  grpc::Status status = UploadMessages({batch}, &response);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("upload message 0"));
  EXPECT_THAT(status.error_message(), HasSubstr("image 37 has label level 10"));
  EXPECT_THAT(status.error_message(), HasSubstr("levels 0 to 9"));
  EXPECT_EQ(StoredRows(), 0);
}

TEST_F(ImageDatasetTest, ImagesAndRowsGoToTheirOwnKindOfDataset) {
  // CSV-style rows into an image dataset.
  v1::UploadRowsRequest rows;
  rows.set_dataset_id(dataset_.id());
  rows.add_rows()->add_cells("0.5");
  rows.mutable_rows(0)->add_cells("3");
  v1::UploadRowsResponse response;
  grpc::Status status = UploadMessages({rows}, &response);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("upload --idx"));
  // Images into a tabular dataset.
  v1::Dataset tabular;
  ASSERT_TRUE(CreateDataset(1.0, 1e-5, v1::ADD_REMOVE, &tabular).ok());
  v1::UploadRowsRequest images = Batch(MakeImages(2, 4), 0, 2);
  images.set_dataset_id(tabular.id());
  status = UploadMessages({images}, &response);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("has no image column"));
  EXPECT_EQ(StoredRows(), 0);
}

TEST_F(ImageDatasetTest, ReleasesOverPixelsUseThePapersLengthScale) {
  const Images images = MakeImages(300, 5);
  v1::UploadRowsResponse response;
  ASSERT_TRUE(UploadMessages({Batch(images, 0, 200), Batch(images, 200, 100)}, &response).ok());

  // Unsealed: the encoded rows are the pixel levels / 255 and the labels.
  Store* store = server_->store();
  const int64_t start = store->row_loads();
  auto encoded = store->LoadEncodedRows(dataset_.id(), Schema());
  ASSERT_TRUE(encoded.ok()) << encoded.status();
  ASSERT_EQ((*encoded)->num_rows(), 300);
  ASSERT_EQ((*encoded)->features.cols(), kPixels);
  EXPECT_EQ((*encoded)->num_classes, kClasses);
  for (int i = 0; i < 300; i += 37) {
    EXPECT_EQ((*encoded)->labels(i), static_cast<int>(images.labels[i]));
    for (int p = 0; p < kPixels; p += 97) {
      ASSERT_EQ((*encoded)->features(i, p),
                static_cast<uint8_t>(images.pixels[i * kPixels + p]) / 255.0);
    }
  }

  v1::Release rff;
  grpc::Status status = RequestRelease(RffRequest(dataset_.id(), 1.0, "rff"), &rff);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_TRUE(rff.has_embedding());
  const v1::EmbeddingArtefact& artefact = rff.embedding();
  auto schema = SchemaFromProto(artefact.schema());
  ASSERT_TRUE(schema.ok());
  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(*schema);
  EXPECT_EQ(layout.numeric_dim, kPixels);
  EXPECT_EQ(layout.total_dim(), kPixels);
  EXPECT_EQ(artefact.num_classes(), kClasses);
  EXPECT_EQ(artefact.feature_dim(), 2 * 50);
  EXPECT_EQ(artefact.class_values_size(), 2 * 50 * kClasses);
  EXPECT_EQ(artefact.class_totals_size(), kClasses);
  // DP-MERF's l^2 = 127 on raw pixels (dp-merf.md, "MNIST DP-MERF").
  EXPECT_DOUBLE_EQ(artefact.length_scale(), std::sqrt(127.0));

  v1::ReleaseRequest charfn_request;
  charfn_request.set_dataset_id(dataset_.id());
  charfn_request.set_idempotency_key("charfn");
  charfn_request.set_epsilon(1.0);
  charfn_request.mutable_charfn_embedding()->set_num_frequencies(40);
  charfn_request.mutable_charfn_embedding()->set_seed(7);
  v1::Release charfn;
  status = RequestRelease(charfn_request, &charfn);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_TRUE(charfn.has_embedding());
  EXPECT_EQ(charfn.embedding().num_classes(), kClasses);
  EXPECT_EQ(charfn.embedding().feature_dim(), 2 * 40);
  // PEARL's code: frequency std 1/sqrt(127) = 0.089 on Fashion-MNIST.
  EXPECT_DOUBLE_EQ(charfn.embedding().length_scale(), std::sqrt(127.0));
  const double numeric = charfn.embedding().numeric_length_scale();
  EXPECT_TRUE(numeric == 0.0 || numeric == std::sqrt(127.0)) << numeric;

  // Sealed at the first release: read from SQLite once, then shared.
  EXPECT_EQ(store->row_loads(), start + 2);
  auto shared = store->LoadEncodedRows(dataset_.id(), Schema());
  ASSERT_TRUE(shared.ok());
  EXPECT_EQ((*shared)->features, (*encoded)->features);
  EXPECT_EQ((*shared)->labels, (*encoded)->labels);
  auto again = store->LoadEncodedRows(dataset_.id(), Schema());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->get(), shared->get());
  EXPECT_EQ(store->row_loads(), start + 2);
  // And sealed means no more images.
  status = UploadMessages({Batch(images, 0, 1)}, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(ImageDatasetTest, SessionStepsSampleImageRows) {
  const Images images = MakeImages(200, 6);
  v1::UploadRowsResponse response;
  ASSERT_TRUE(UploadMessages({Batch(images, 0, 200)}, &response).ok());
  client::Connection analyst = Analyst();
  v1::OpenSessionRequest open;
  open.set_dataset_id(dataset_.id());
  open.set_idempotency_key("image-session");
  open.mutable_params()->set_steps(3);
  open.mutable_params()->set_sampling_rate(0.1);
  open.mutable_params()->set_noise_multiplier(2.0);
  open.mutable_params()->mutable_rff_embedding()->set_num_frequencies(20);
  v1::Session session;
  {
    auto context = analyst.NewContext();
    grpc::Status status = analyst.sessions().OpenSession(context.get(), open, &session);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  v1::SessionStepRequest step;
  step.set_session_id(session.id());
  step.set_step(0);
  v1::SessionStepResponse answer;
  auto context = analyst.NewContext();
  grpc::Status status = analyst.sessions().Step(context.get(), step, &answer);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_TRUE(answer.has_batch());
  EXPECT_EQ(answer.batch().num_classes(), kClasses);
  EXPECT_EQ(answer.batch().feature_dim(), 2 * 20);
  EXPECT_DOUBLE_EQ(answer.batch().length_scale(), std::sqrt(127.0));
}

}  // namespace
}  // namespace dpcurator::server::testing
