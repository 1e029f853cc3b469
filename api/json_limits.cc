#include "api/json_limits.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "api/api_error.h"

namespace ringlm {
namespace {

// nlohmann's own DOM builder behind a gate that counts elements and depth and
// aborts the parse (returns false) at the first one past a limit. The DOM
// builder is in nlohmann's detail namespace; it is the class json::parse
// itself uses, stable across 3.x.
template <typename Json>
class LimitedDomSax {
 public:
  LimitedDomSax(Json& root, const JsonLimits& limits)
      : dom_(root, /*allow_exceptions=*/false), limits_(limits) {}

  bool null() { return Count() && dom_.null(); }
  bool boolean(bool v) { return Count() && dom_.boolean(v); }
  bool number_integer(typename Json::number_integer_t v) {
    return Count() && dom_.number_integer(v);
  }
  bool number_unsigned(typename Json::number_unsigned_t v) {
    return Count() && dom_.number_unsigned(v);
  }
  bool number_float(typename Json::number_float_t v, const std::string& s) {
    return Count() && dom_.number_float(v, s);
  }
  bool string(std::string& v) { return Count() && dom_.string(v); }
  bool binary(typename Json::binary_t& v) { return Count() && dom_.binary(v); }
  bool start_object(std::size_t n) { return Count() && Open() && dom_.start_object(n); }
  bool key(std::string& k) { return Count() && dom_.key(k); }
  bool end_object() {
    --depth_;
    return dom_.end_object();
  }
  bool start_array(std::size_t n) { return Count() && Open() && dom_.start_array(n); }
  bool end_array() {
    --depth_;
    return dom_.end_array();
  }
  bool parse_error(std::size_t position, const std::string& /*token*/,
                   const nlohmann::detail::exception& e) {
    if (error_.empty()) {
      error_ =
          absl::StrCat("the request body is not valid JSON (at byte ", position, "): ", e.what());
    }
    return false;
  }

  // Set when the parse was stopped, by a limit or a syntax error.
  const std::string& error() const { return error_; }

 private:
  bool Count() {
    if (++elements_ <= limits_.max_elements) return true;
    error_ =
        absl::StrCat("the request body has more than ", limits_.max_elements, " JSON elements");
    return false;
  }
  bool Open() {
    if (++depth_ <= limits_.max_depth) return true;
    error_ = absl::StrCat("the request body is nested deeper than ", limits_.max_depth, " levels");
    return false;
  }

  nlohmann::detail::json_sax_dom_parser<Json> dom_;
  const JsonLimits limits_;
  size_t elements_ = 0;
  int depth_ = 0;
  std::string error_;
};

template <typename Json>
absl::StatusOr<Json> Parse(std::string_view text, const JsonLimits& limits) {
  Json root;
  LimitedDomSax<Json> sax(root, limits);
  const bool ok = Json::sax_parse(text.begin(), text.end(), &sax, Json::input_format_t::json,
                                  /*strict=*/true);
  if (!ok || !sax.error().empty()) {
    // Drop the partial tree before building the error.
    root = Json();
    return InvalidFieldError(
        "", sax.error().empty() ? "the request body is not valid JSON" : sax.error());
  }
  return root;
}

}  // namespace

absl::StatusOr<nlohmann::json> ParseJsonWithLimits(std::string_view text,
                                                   const JsonLimits& limits) {
  return Parse<nlohmann::json>(text, limits);
}

absl::StatusOr<nlohmann::ordered_json> ParseOrderedJsonWithLimits(std::string_view text,
                                                                  const JsonLimits& limits) {
  return Parse<nlohmann::ordered_json>(text, limits);
}

}  // namespace ringlm
