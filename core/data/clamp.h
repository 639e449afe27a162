#ifndef DPCURATOR_CORE_DATA_CLAMP_H_
#define DPCURATOR_CORE_DATA_CLAMP_H_

#include "core/data/schema.h"

namespace dpcurator::data {

// A finite value of a numeric column as Schema::ParseCell stores it:
// clamped to the declared bounds (PRIVACY.md: bounds are enforced by
// clamping, and counted). ParseCell's own step, shared with readers of
// typed values (the Python module's DataFrame blocks, python/src/rows.cc),
// so both read a cell the same way.
ParsedCell ClampNumeric(const Column& column, double value);

}  // namespace dpcurator::data

#endif  // DPCURATOR_CORE_DATA_CLAMP_H_
