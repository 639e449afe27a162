#include "server/shared_database.h"

#include "core/util/status_macros.h"

namespace dpcurator::server {

absl::StatusOr<std::unique_ptr<SharedDatabase>> SharedDatabase::Open(const std::string& path) {
  DPC_ASSIGN_OR_RETURN(std::unique_ptr<Database> db, Database::Open(path));
  return std::make_unique<SharedDatabase>(std::move(db));
}

}  // namespace dpcurator::server
