// Parse errors, unsupported constructs, raise_exception and concurrency.
// (Rendering semantics are covered against jinja2 in
// reference_cases_test.cc and tests/templates/check_templates.py.)
#include <string>
#include <thread>
#include <vector>

#include "chat/jinja/internal/str_cat.h"
#include "chat/jinja/template.h"
#include "chat/jinja/test_util.h"
#include "gtest/gtest.h"

namespace ringlm::jinja {
namespace {

using testing::Render;

absl::Status ParseStatus(std::string_view source) { return Template::Parse(source).status(); }

bool Contains(absl::string_view haystack, std::string_view needle) {
  return std::string(haystack).find(needle) != std::string::npos;
}

TEST(JinjaRenderTest, RendersContextVariables) {
  absl::StatusOr<std::string> out = Render(
      "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}"
      "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}",
      {{"bos_token", "<s>"}, {"add_generation_prompt", true}},
      {{"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "<s><user>hi<assistant>");
}

TEST(JinjaRenderTest, UnsupportedTagsFailAtParseTimeNamingTagAndLine) {
  for (std::string_view tag :
       {"include", "import", "extends", "block", "call", "do", "frobnicate"}) {
    std::string source = "line1\nline2\n{% " + std::string(tag) + " x %}";
    absl::Status status = ParseStatus(source);
    EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << tag;
    EXPECT_EQ(status.message(), "unsupported Jinja tag '" + std::string(tag) + "' at line 3")
        << status;
  }
}

TEST(JinjaRenderTest, UnsupportedFiltersTestsAndLoopsFailAtParseTime) {
  absl::Status filter = ParseStatus("{{ x | groupby('a') }}");
  EXPECT_EQ(filter.code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(Contains(filter.message(), "filter 'groupby'")) << filter;
  absl::Status test = ParseStatus("\n{{ x is frob }}");
  EXPECT_EQ(test.code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(Contains(test.message(), "test 'frob' at line 2")) << test;
  absl::Status recursive = ParseStatus("{% for x in y recursive %}{{ loop(x) }}{% endfor %}");
  EXPECT_EQ(recursive.code(), absl::StatusCode::kUnimplemented);
  absl::Status star = ParseStatus("{{ f(*args) }}");
  EXPECT_EQ(star.code(), absl::StatusCode::kUnimplemented);
}

TEST(JinjaRenderTest, SyntaxErrorsNameTheLine) {
  struct Case {
    std::string_view source;
    std::string_view expect;
  };
  for (const Case& c : std::vector<Case>{
           {"a\n{% if x %}\nno end", "line 3"},
           {"{% endif %}", "unexpected tag 'endif'"},
           {"\n\n{{ 1 + }}", "line 3"},
           {"{% for x %}{% endfor %}", "expected 'in'"},
           {"{{ x y }}", "expected end of print statement"},
           {"{% break %}", "'break' outside of a loop"},
           {"{% set %}", "expected a name"},
           {"{{ 'unterminated }}", "unterminated string"},
           {"{% macro m(a=1, b) %}{% endmacro %}", "non-default argument"},
       }) {
    absl::Status status = ParseStatus(c.source);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.source;
    EXPECT_TRUE(Contains(status.message(), c.expect)) << c.source << " -> " << status;
  }
}

TEST(JinjaRenderTest, RaiseExceptionCarriesTheMessage) {
  absl::StatusOr<std::string> out = Render(
      "{% if messages[0].role != 'user' %}"
      "{{ raise_exception('Conversation must start with a user turn') }}"
      "{% endif %}ok",
      nullptr, {{"messages", {{{"role", "assistant"}, {"content", "x"}}}}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(), "Conversation must start with a user turn");
}

TEST(JinjaRenderTest, UndefinedAttributeIsAnErrorButPrintsEmpty) {
  EXPECT_EQ(*Render("[{{ missing }}][{{ d.missing }}]", {{"d", {{"a", 1}}}}), "[][]");
  absl::StatusOr<std::string> out = Render("{{ missing.attr }}");
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(Contains(out.status().message(), "'missing' is undefined")) << out.status();
}

TEST(JinjaRenderTest, SandboxRefusesListMutation) {
  absl::StatusOr<std::string> out = Render("{% set l = [1] %}{{ l.append(2) }}");
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(Contains(out.status().message(), "unsafe")) << out.status();
}

TEST(JinjaRenderTest, ContextMustBeADict) {
  absl::StatusOr<Template> tmpl = Template::Parse("x");
  ASSERT_TRUE(tmpl.ok());
  EXPECT_FALSE(tmpl->Render(Value::Int(1)).ok());
}

TEST(JinjaRenderTest, DictKeysKeepInsertionOrder) {
  absl::StatusOr<std::string> out =
      Render("{{ d|tojson }}{% for k in d %}{{ k }}{% endfor %}",
             nlohmann::ordered_json::parse(R"({"d": {"z": 1, "a": 2, "m": 3}})"));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, R"({"z": 1, "a": 2, "m": 3}zam)");
}

TEST(JinjaRenderTest, OneTemplateRendersFromManyThreads) {
  absl::StatusOr<Template> tmpl = Template::Parse(
      "{% set ns = namespace(n=0) %}{% for m in messages %}"
      "{% set ns.n = ns.n + 1 %}{{ m|upper }}{% endfor %}{{ ns.n }}");
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  std::vector<std::thread> threads;
  std::vector<std::string> results(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      nlohmann::ordered_json messages = nlohmann::ordered_json::array();
      for (int i = 0; i <= t; ++i) messages.push_back(internal::Cat("m", t));
      absl::StatusOr<Value> ctx = MakeContext(nullptr, {{"messages", messages}});
      for (int rep = 0; rep < 200; ++rep) {
        absl::StatusOr<std::vector<Segment>> out = tmpl->Render(*ctx);
        results[t] = out.ok() ? JoinSegments(*out) : "error";
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < 8; ++t) {
    std::string expected;
    for (int i = 0; i <= t; ++i) expected += "M" + std::to_string(t);
    expected += std::to_string(t + 1);
    EXPECT_EQ(results[t], expected);
  }
}

}  // namespace
}  // namespace ringlm::jinja
