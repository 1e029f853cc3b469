// The exact length of TensorManifest::Serialize() for a file's tensor table,
// so that a manifest file of any other length is refused before it is read.
#ifndef RINGLM_MODEL_STORE_INTERNAL_MANIFEST_SIZE_H_
#define RINGLM_MODEL_STORE_INTERNAL_MANIFEST_SIZE_H_

#include <cstdint>

#include "gguf/gguf_file.h"

namespace ringlm::model_store_internal {

uint64_t SerializedManifestBytes(const GgufFile& file);

}  // namespace ringlm::model_store_internal

#endif  // RINGLM_MODEL_STORE_INTERNAL_MANIFEST_SIZE_H_
