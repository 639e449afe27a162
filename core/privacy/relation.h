#ifndef DPCURATOR_CORE_PRIVACY_RELATION_H_
#define DPCURATOR_CORE_PRIVACY_RELATION_H_

#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"
#include "core/privacy/events.h"  // NeighbouringRelation, RelationName

namespace dpcurator::privacy {

// Reads "add-remove" / "replace-one" (any case, '-' or '_').
inline std::optional<NeighbouringRelation> ParseRelation(absl::string_view text) {
  std::string normal = absl::AsciiStrToLower(text);
  for (char& c : normal) c = c == '-' ? '_' : c;
  if (normal == "add_remove") return NeighbouringRelation::kAddRemove;
  if (normal == "replace_one") return NeighbouringRelation::kReplaceOne;
  return std::nullopt;
}

}  // namespace dpcurator::privacy

#endif  // DPCURATOR_CORE_PRIVACY_RELATION_H_
