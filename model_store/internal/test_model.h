// Test-only helpers for model_store tests: small GGUF files with multi-chunk
// tensors, scratch folders, and whole-file reads.
#ifndef RINGLM_MODEL_STORE_INTERNAL_TEST_MODEL_H_
#define RINGLM_MODEL_STORE_INTERNAL_TEST_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "gguf/gguf_file.h"

namespace ringlm::model_store_test {

// A GGUF file on disk and its parse.
struct TestModel {
  std::string path;
  std::string bytes;  // the whole file
  std::unique_ptr<GgufFile> file;

  // Bytes [0, data offset).
  std::string header() const { return bytes.substr(0, file->data_offset()); }
};

// Index of each tensor in kTestModel files (table order).
enum TestTensor : size_t {
  kBig = 0,     // F32, 9 MiB: chunks of 4, 4 and 1 MiB
  kMid = 1,     // F32, ~4.3 MiB: two chunks
  kSmallA = 2,  // a few hundred bytes each
  kSmallB = 3,
  kSmallC = 4,
  kTensorCount = 5,
};

// Writes a model with the tensors above to `path`; `seed` varies the tensor
// bytes (never all zero) but not the layout. Aborts the test on failure.
TestModel WriteTestModel(const std::string& path, uint32_t seed = 1);
// A model with a different layout (two tensors), for mismatch tests.
TestModel WriteOtherModel(const std::string& path);

// A fresh folder under the test temp dir; removed by RemoveScratchDir.
std::string MakeScratchDir();
// Makes the tree writable again (tests chmod folders) and removes it.
void RemoveScratchDir(const std::string& dir);

std::string ReadWholeFile(const std::string& path);

}  // namespace ringlm::model_store_test

#endif  // RINGLM_MODEL_STORE_INTERNAL_TEST_MODEL_H_
