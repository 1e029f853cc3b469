#include "chat/template_shape.h"

#include <string>

namespace ringlm {
namespace {

using Json = nlohmann::ordered_json;

// Names no real conversation holds, so that finding one in the output means
// the template showed that part of the probe.
constexpr char kProbeTool[] = "ringlm_probe_tool";
constexpr char kProbeCall[] = "ringlm_probe_call";
constexpr char kProbeArgument[] = "ringlm_probe_argument";

Json ProbeTools() {
  return Json::array({{{"type", "function"},
                       {"function",
                        {{"name", kProbeTool},
                         {"description", "A probe."},
                         {"parameters", {{"type", "object"}, {"properties", Json::object()}}}}}}});
}

// The rendered text of `messages` (with the probe tools); "" on an error.
std::string Rendered(const jinja::Template& t, const Json& trusted, const Json& messages) {
  absl::StatusOr<jinja::Value> context =
      jinja::MakeContext(trusted, Json{{"messages", messages}, {"tools", ProbeTools()}});
  if (!context.ok()) return "";
  absl::StatusOr<std::vector<jinja::Segment>> out = t.Render(*context);
  return out.ok() ? jinja::JoinSegments(*out) : "";
}

bool Shows(const std::string& text, const char* part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TemplateShape ProbeTemplateShape(const jinja::Template& t, const Json& trusted) {
  TemplateShape shape;
  const Json question = {{"role", "user"}, {"content", "What does the probe say?"}};
  const std::string asked = Rendered(t, trusted, Json::array({question}));
  shape.renders_tools = asked.empty() || Shows(asked, kProbeTool);
  // A call and its result, in each shape the template may want, the one
  // ringlm passed before first: the first whose call shows wins.
  for (const bool null_content : {false, true}) {
    for (const bool string_arguments : {false, true}) {
      const Json arguments = {{kProbeArgument, 1}};
      const Json call = {{"id", "call_probe"},
                         {"type", "function"},
                         {"function",
                          {{"name", kProbeCall},
                           {"arguments", string_arguments ? Json(arguments.dump()) : arguments}}}};
      const Json messages =
          Json::array({question,
                       {{"role", "assistant"},
                        {"content", null_content ? Json(nullptr) : Json("")},
                        {"tool_calls", Json::array({call})}},
                       {{"role", "tool"}, {"tool_call_id", "call_probe"}, {"content", "42"}}});
      const std::string text = Rendered(t, trusted, messages);
      if (Shows(text, kProbeCall) && Shows(text, kProbeArgument)) {
        shape.null_content_with_calls = null_content;
        shape.string_arguments = string_arguments;
        return shape;
      }
    }
  }
  return shape;
}

}  // namespace ringlm
