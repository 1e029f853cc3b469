// libFuzzer target: the request-body parsers, fed arbitrary bytes. They must
// never crash, hang or allocate without bound; every input gives a request
// or an InvalidArgument. Built only with -DRINGLM_FUZZ=ON (see CMakeLists.txt);
// seeds in api/testdata/request_corpus.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "api/completion_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const ringlm::JsonLimits limits;  // the server's defaults
  (void)ringlm::ParseChatCompletionRequest(body, limits);
  (void)ringlm::ParseTextCompletionRequest(body, limits);
  return 0;
}
