// The method registry (client/methods/registry.h): every MethodId has its
// unit, names are unique and found again, every unit's option table is
// complete, and model files are checked before a sampler sees them.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "client/methods/registry.h"
#include "client/model_package.h"

namespace dpcurator::client {
namespace {

TEST(MethodRegistryTest, EveryIdHasItsOwnUnit) {
  const auto& methods = RegisteredMethods();
  ASSERT_FALSE(methods.empty());
  for (size_t i = 0; i < methods.size(); ++i) {
    const Method* method = MethodFor(static_cast<MethodId>(i));
    ASSERT_NE(method, nullptr) << i;
    EXPECT_EQ(method, methods[i]);
    EXPECT_EQ(static_cast<size_t>(method->id()), i) << method->name();
  }
  // One past the last enumerator: no unit, which is how the list ends.
  EXPECT_EQ(MethodFor(static_cast<MethodId>(methods.size())), nullptr);
}

TEST(MethodRegistryTest, NamesAreUniqueAndFoundAgain) {
  std::set<std::string> names;
  for (const Method* method : RegisteredMethods()) {
    const std::string name(method->name());
    EXPECT_FALSE(name.empty());
    EXPECT_EQ(name.find(' '), std::string::npos) << name;
    EXPECT_TRUE(names.insert(name).second) << "two units named " << name;
    auto found = FindMethod(name);
    ASSERT_TRUE(found.ok()) << found.status();
    EXPECT_EQ(*found, method);
  }
  auto unknown = FindMethod("no-such-method");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  // The refusal lists what the client knows.
  for (const std::string& name : names) {
    EXPECT_NE(unknown.status().message().find(name), std::string::npos) << name;
  }
}

TEST(MethodRegistryTest, EveryUnitDescribesItsTrainCommand) {
  for (const Method* method : RegisteredMethods()) {
    EXPECT_FALSE(method->title().empty()) << method->name();
    EXPECT_FALSE(method->TrainSummary().empty()) << method->name();
    EXPECT_FALSE(method->TrainDescription().empty()) << method->name();
    std::set<std::string> options;
    for (const OptionSpec& o : method->TrainOptions()) {
      EXPECT_TRUE(options.insert(o.name).second) << method->name() << " --" << o.name;
    }
    // `train` writes the model to --out.
    EXPECT_EQ(options.count("out"), 1u) << method->name();
  }
}

TEST(MethodRegistryTest, ModelFilesAreCheckedBeforeSampling) {
  v1::GeneratorModel model;  // what a file of another kind parses as
  auto method = MethodOfModel(model);
  EXPECT_EQ(method.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(method.status().message().find("format version 0"), std::string::npos);
  model.set_format_version(kModelFormatVersion);
  model.set_method("no-such-method");
  method = MethodOfModel(model);
  EXPECT_EQ(method.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(method.status().message().find("'no-such-method'"), std::string::npos);
  for (const Method* known : RegisteredMethods()) {
    model.set_method(std::string(known->name()));
    auto found = MethodOfModel(model);
    ASSERT_TRUE(found.ok()) << found.status();
    EXPECT_EQ(*found, known);
  }
  EXPECT_FALSE(SampleModel(model, 0, 1).ok());  // --rows must be positive
}

}  // namespace
}  // namespace dpcurator::client
