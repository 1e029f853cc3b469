// Hard limits for untrusted templates: every one is an error status.
#include <string>

#include "chat/jinja/template.h"
#include "chat/jinja/test_util.h"
#include "gtest/gtest.h"

namespace ringlm::jinja {
namespace {

using testing::Render;

absl::StatusCode Code(std::string_view source, const RenderOptions& o = {}) {
  return Render(source, nullptr, nullptr, o).status().code();
}

TEST(JinjaLimitsTest, HugeRangeIsRefused) {
  EXPECT_EQ(Code("{% for i in range(100000000) %}x{% endfor %}"),
            absl::StatusCode::kResourceExhausted);
}

TEST(JinjaLimitsTest, StepBudgetStopsLongLoops) {
  RenderOptions o;
  o.max_steps = 10'000;
  EXPECT_EQ(Code("{% for i in range(1000) %}{% for j in range(1000) %}"
                 "{% endfor %}{% endfor %}",
                 o),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Code("{% for i in range(10) %}{{ i }}{% endfor %}", o), absl::StatusCode::kOk);
}

TEST(JinjaLimitsTest, RecursiveMacroIsBounded) {
  EXPECT_EQ(Code("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
            absl::StatusCode::kResourceExhausted);
}

TEST(JinjaLimitsTest, DeepestAllowedRecursionWithNestedExpressionsRuns) {
  // 32 macro levels (the default limit), each evaluating a 20-deep expression:
  // must fit the stack (this also runs under ASan).
  std::string open(20, '(');
  std::string close(20, ')');
  std::string source = "{% macro f(n) %}{% if n > 0 %}{% for i in [1] %}{{ " + open + "f(n - 1)" +
                       close +
                       " }}{% endfor %}{% else %}x{% endif %}"
                       "{% endmacro %}{{ f(31) }}|{{ f(32) }}";
  absl::StatusOr<std::string> out = Render(source);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(*Render("{% macro f(n) %}{% if n > 0 %}{{ " + open + "f(n - 1)" + close +
                    " }}{% else %}x{% endif %}{% endmacro %}{{ f(31) }}"),
            "x");
}

TEST(JinjaLimitsTest, OutputSizeIsBounded) {
  RenderOptions o;
  o.max_output_bytes = 1 << 16;
  EXPECT_EQ(Code("{% for i in range(100000) %}xxxxxxxx{% endfor %}", o),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Code("{{ 'x' * 100000000 }}", o), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Code("{% set ns = namespace(s='ab') %}{% for i in range(40) %}"
                 "{% set ns.s = ns.s + ns.s %}{% endfor %}",
                 o),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Code("{{ [1] * 100000000 }}"), absl::StatusCode::kResourceExhausted);
}

TEST(JinjaLimitsTest, StringAmplifiersAreBounded) {
  RenderOptions o;
  o.max_output_bytes = 1 << 20;
  const std::string big = "{% set s = 'ab\n' * 300000 %}";
  for (std::string_view expr :
       {"s.replace('', 'xxxxxxxx')", "s|replace('a', 'aaaaaaaaaaaaaaaa')", "s|indent(1000)",
        "'{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}'.format(s)", "'%s%s%s%s%s%s' % (s, s, s, s, s, s)",
        "s.split('a')", "s|list", "s.splitlines()", "(s.split('a') * 1)|tojson(indent=64)"}) {
    EXPECT_EQ(Code(big + "{{ " + std::string(expr) + " }}", o),
              absl::StatusCode::kResourceExhausted)
        << expr;
  }
}

TEST(JinjaLimitsTest, DeepValuesInNamespacesAreBounded) {
  EXPECT_EQ(Code("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}"
                 "{% set ns.x = [ns.x] %}{% endfor %}"),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Code("{% set ns = namespace(x={}) %}{% for i in range(100000) %}"
                 "{% set ns.x = {'a': ns.x.items} %}{% endfor %}"),
            absl::StatusCode::kResourceExhausted);
  // A long chain of namespaces is released without deep recursion.
  EXPECT_EQ(Code("{% set st = namespace(cur=namespace()) %}"
                 "{% for i in range(90000) %}{% set n = namespace() %}"
                 "{% set c = st.cur %}{% set c.p = n %}{% set st.cur = n %}"
                 "{% endfor %}done"),
            absl::StatusCode::kOk);
  // Self-reference does not leak or loop.
  EXPECT_EQ(Code("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns.me.me }}"),
            absl::StatusCode::kOk);
}

TEST(JinjaLimitsTest, DeepNestingFailsAtParseTime) {
  std::string parens = std::string(5000, '(') + "1" + std::string(5000, ')');
  EXPECT_EQ(Template::Parse("{{ " + parens + " }}").status().code(),
            absl::StatusCode::kResourceExhausted);
  std::string nots;
  for (int i = 0; i < 5000; ++i) nots += "not ";
  EXPECT_EQ(Template::Parse("{{ " + nots + "x }}").status().code(),
            absl::StatusCode::kResourceExhausted);
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if x %}";
  EXPECT_EQ(Template::Parse(ifs).status().code(), absl::StatusCode::kResourceExhausted);
  std::string filters = "{{ x";
  for (int i = 0; i < 5000; ++i) filters += "|trim";
  EXPECT_TRUE(Template::Parse(filters + " }}").ok());
}

TEST(JinjaLimitsTest, DeepJsonContextIsRejected) {
  nlohmann::ordered_json deep = 1;
  for (int i = 0; i < 1000; ++i) deep = nlohmann::ordered_json::array({deep});
  EXPECT_EQ(MakeContext(nullptr, {{"messages", deep}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(JinjaLimitsTest, SourceSizeIsBounded) {
  ParseOptions o;
  o.max_source_bytes = 10;
  EXPECT_EQ(Template::Parse("0123456789ab", o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(JinjaLimitsTest, ArbitraryBytesNeverCrashTheParser) {
  // A deterministic sweep of short byte strings built from Jinja syntax
  // fragments; each must parse or fail cleanly (and render if it parses).
  const char* kPieces[] = {"{{",    "}}",     "{%",  "%}",     "{#", "#}", "-",    "+",
                           "if",    "for",    "x",   " in ",   "(",  ")",  "[",    "]",
                           "'",     "\"",     "|",   "trim",   ".",  ":",  "\xff", "\n",
                           "endif", "endfor", "raw", "endraw", ",",  "=",  "set",  "macro",
                           "1",     "not",    "is",  "{",      "}"};
  const size_t n = sizeof(kPieces) / sizeof(kPieces[0]);
  uint64_t state = 12345;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string source;
    int len = 1 + static_cast<int>(state % 12);
    for (int i = 0; i < len; ++i) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      source += kPieces[(state >> 33) % n];
    }
    absl::StatusOr<Template> tmpl = Template::Parse(source);
    if (tmpl.ok()) {
      RenderOptions o;
      o.max_steps = 100'000;
      (void)tmpl->Render(Value::Dict(ValueDict()), o);
    }
  }
  SUCCEED();
}

}  // namespace
}  // namespace ringlm::jinja
