#include "chat/template_shape.h"

#include <string>

#include "chat/npm_template_for_test.h"
#include "gtest/gtest.h"

namespace ringlm {
namespace {

TemplateShape Probe(const std::string& source) {
  absl::StatusOr<jinja::Template> t = jinja::Template::Parse(source);
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return {};
  return ProbeTemplateShape(*t, {{"bos_token", "<s>"}, {"add_generation_prompt", true}});
}

TEST(TemplateShapeTest, AHermesTemplateTakesToolsAndObjectArguments) {
  const TemplateShape shape = Probe(
      "{% if tools %}{% for t in tools %}{{ t | tojson }}{% endfor %}{% endif %}"
      "{% for m in messages %}{{ m.role }}: {{ m.content }}"
      "{% for c in m.tool_calls or [] %}<tool_call>{{ c.function | tojson }}</tool_call>"
      "{% endfor %}\n{% endfor %}");
  EXPECT_TRUE(shape.renders_tools);
  EXPECT_FALSE(shape.null_content_with_calls);
  EXPECT_FALSE(shape.string_arguments);
}

TEST(TemplateShapeTest, ConcatenatedArgumentsAndCallsOnlyWithoutContent) {
  const TemplateShape shape = Probe(
      "{% for m in messages %}{% if m.role == 'assistant' and m.content is none %}"
      "{% for c in m.tool_calls %}{{ '[' + c.function.name + ' ' + c.function.arguments + ']' }}"
      "{% endfor %}{% else %}{{ m.role + ': ' + (m.content or '') }}{% endif %}{% endfor %}");
  EXPECT_FALSE(shape.renders_tools);
  EXPECT_TRUE(shape.null_content_with_calls);
  EXPECT_TRUE(shape.string_arguments);
}

TEST(TemplateShapeTest, WhatNoProbeShowsKeepsTheDefaults) {
  const TemplateShape refuses = Probe("{{ raise_exception('no') }}");
  EXPECT_TRUE(refuses.renders_tools);
  EXPECT_FALSE(refuses.null_content_with_calls);
  EXPECT_FALSE(refuses.string_arguments);
  const TemplateShape no_calls = Probe("{% for m in messages %}{{ m.content }}{% endfor %}");
  EXPECT_FALSE(no_calls.renders_tools);
  EXPECT_FALSE(no_calls.null_content_with_calls);
  EXPECT_FALSE(no_calls.string_arguments);
}

TEST(TemplateShapeTest, TheRealTemplates) {
  NPM_TEMPLATE_OR_SKIP(deepseek, "deepseek_v3");
  const TemplateShape shape = Probe(deepseek);
  EXPECT_FALSE(shape.renders_tools);
  EXPECT_TRUE(shape.null_content_with_calls);
  EXPECT_TRUE(shape.string_arguments);
  for (const char* name : {"qwen2_5", "qwen3", "llama3_2", "mistral_nemo"}) {
    const std::string source = testing::NpmChatTemplate(name);
    if (source.empty()) continue;
    const TemplateShape other = Probe(source);
    EXPECT_TRUE(other.renders_tools) << name;
    EXPECT_FALSE(other.null_content_with_calls) << name;
    EXPECT_FALSE(other.string_arguments) << name;
  }
}

}  // namespace
}  // namespace ringlm
