#ifndef DPCURATOR_CLIENT_PIPELINE_H_
#define DPCURATOR_CLIENT_PIPELINE_H_

// Transitional (issue 25 item 1): pipeline.cc is gone. Its uploads are
// client/upload.h, its files and keys client/proto_file.h, its trainers and
// samplers the method units (client/methods/). dataset_cmd.cc and
// release_cmd.cc still include this header; the lead points them at the
// two headers when moving them to client/commands/, and deletes this one.
// Nothing new may include it.

#include "client/proto_file.h"
#include "client/upload.h"

#endif  // DPCURATOR_CLIENT_PIPELINE_H_
