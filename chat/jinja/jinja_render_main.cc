// jinja_render: renders a chat template with a JSON context (a test tool for
// tests/templates/check_templates.py).
//
//   jinja_render --template FILE --context FILE [--segments] [--now SECONDS]
//                [--untrusted KEY,KEY,...]
//
// The context file is a JSON object of template variables; the keys named by
// --untrusted (default messages,tools,documents) are content, the rest are
// control. Prints the rendered text to stdout (or, with --segments, a JSON
// array of {"control": bool, "text": str}). On an error prints
// "error: <status>" to stderr and exits 1. strftime_now uses --now (UTC)
// when given.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "chat/jinja/template.h"
#include "nlohmann/json.hpp"

namespace {

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

int Fail(const std::string& message) {
  std::cerr << "error: " << message << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string template_path;
  std::string context_path;
  std::string untrusted_keys = "messages,tools,documents";
  bool segments = false;
  bool has_now = false;
  int64_t now_seconds = 0;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "missing value for " << arg << "\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--template") {
      template_path = next();
    } else if (arg == "--context") {
      context_path = next();
    } else if (arg == "--segments") {
      segments = true;
    } else if (arg == "--now") {
      has_now = true;
      now_seconds = std::atoll(next().c_str());
    } else if (arg == "--untrusted") {
      untrusted_keys = next();
    } else {
      std::cerr << "unknown argument " << arg << "\n";
      return 2;
    }
  }
  if (template_path.empty() || context_path.empty()) {
    std::cerr << "usage: jinja_render --template FILE --context FILE "
                 "[--segments] [--now SECONDS] [--untrusted KEYS]\n";
    return 2;
  }
  std::string source;
  std::string context_text;
  if (!ReadFile(template_path, &source)) return Fail("cannot read template");
  if (!ReadFile(context_path, &context_text)) return Fail("cannot read context");
  nlohmann::ordered_json context = nlohmann::ordered_json::parse(context_text, nullptr, false);
  if (context.is_discarded() || !context.is_object()) {
    return Fail("context is not a JSON object");
  }
  nlohmann::ordered_json trusted = nlohmann::ordered_json::object();
  nlohmann::ordered_json untrusted = nlohmann::ordered_json::object();
  std::vector<std::string> keys = absl::StrSplit(untrusted_keys, ',');
  for (auto it = context.begin(); it != context.end(); ++it) {
    bool is_untrusted = std::find(keys.begin(), keys.end(), it.key()) != keys.end();
    (is_untrusted ? untrusted : trusted)[it.key()] = it.value();
  }

  absl::StatusOr<ringlm::jinja::Template> tmpl = ringlm::jinja::Template::Parse(source);
  if (!tmpl.ok()) return Fail(tmpl.status().ToString());
  absl::StatusOr<ringlm::jinja::Value> ctx = ringlm::jinja::MakeContext(trusted, untrusted);
  if (!ctx.ok()) return Fail(ctx.status().ToString());
  ringlm::jinja::RenderOptions options;
  if (has_now) {
    absl::Time now = absl::FromUnixSeconds(now_seconds);
    options.now = [now] { return now; };
    options.time_zone = absl::UTCTimeZone();
  }
  absl::StatusOr<std::vector<ringlm::jinja::Segment>> out = tmpl->Render(*ctx, options);
  if (!out.ok()) return Fail(out.status().ToString());
  if (segments) {
    nlohmann::ordered_json array = nlohmann::ordered_json::array();
    for (const auto& s : *out) {
      array.push_back({{"control", s.is_control}, {"text", s.text}});
    }
    std::cout << array.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  } else {
    std::string text = ringlm::jinja::JoinSegments(*out);
    std::fwrite(text.data(), 1, text.size(), stdout);
  }
  return 0;
}
