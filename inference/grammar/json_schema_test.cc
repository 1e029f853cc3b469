// JSON schema compilation: refused schemas, response_format, and what the
// compiled grammars accept (checked byte by byte with a single-byte vocabulary).
#include "inference/grammar/json_schema.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/grammar/grammar_matcher.h"
#include "inference/grammar/test_vocab.h"

namespace ringlm::grammar {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::ordered_json;

absl::Status CompileError(const std::string& schema, GrammarOptions options = {}) {
  absl::StatusOr<Grammar> g = CompileJsonSchema(Json::parse(schema), options);
  return g.status();
}

// Whether `text` is a complete match of `schema`.
bool Matches(const std::string& schema, const std::string& text, GrammarOptions options = {}) {
  absl::StatusOr<Grammar> g = CompileJsonSchema(Json::parse(schema), options);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return false;
  GrammarMatcher m(*g, std::make_shared<const TokenVocabulary>(testing::ByteVocab()));
  return m.AcceptBytes(text).ok() && m.CanEnd();
}

TEST(JsonSchemaTest, RefusesKeywordsItDoesNotEnforce) {
  for (const char* keyword : {"pattern", "format", "multipleOf", "patternProperties",
                              "minProperties", "not", "prefixItems", "if"}) {
    const std::string schema =
        std::string(R"({"type":"object","properties":{"x":{"type":"string",")") + keyword +
        R"(":"1"}}})";
    absl::Status s = CompileError(schema);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << keyword;
    EXPECT_THAT(s.message(), HasSubstr(keyword));
    EXPECT_THAT(s.message(), HasSubstr("#/properties/x"));
  }
  EXPECT_THAT(CompileError(R"({"type":"array","uniqueItems":true})").message(),
              HasSubstr("uniqueItems"));
  EXPECT_TRUE(
      CompileError(R"({"type":"array","uniqueItems":false,"title":"t","x-vendor":1})").ok());
}

TEST(JsonSchemaTest, RefusesMalformedSchemas) {
  const char* bad[] = {
      R"({"type":"strin"})",
      R"({"type":[]})",
      R"({"type":"object","properties":[]})",
      R"({"type":"object","properties":{"a":{}},"required":["b"]})",
      R"({"type":"string","minLength":3,"maxLength":2})",
      R"({"type":"array","minItems":-1})",
      R"({"type":"array","maxItems":1.5})",
      R"({"type":"array","items":[{"type":"string"}]})",
      R"({"$ref":"#/$defs/missing"})",
      R"({"$ref":"http://example.com/schema"})",
      R"({"enum":[]})",
      R"({"type":"string","enum":[1,2]})",
      R"({"anyOf":[]})",
      R"({"allOf":[{"type":"string"},{"maxLength":2}]})",
      R"({"type":"object","anyOf":[{"required":["a"]}]})",
      R"({"$ref":"#/$defs/a","maxLength":2,"$defs":{"a":{"type":"string"}}})",
      R"(false)",
      R"(3)",
  };
  for (const char* schema : bad) {
    EXPECT_EQ(CompileError(schema).code(), absl::StatusCode::kInvalidArgument) << schema;
  }
}

TEST(JsonSchemaTest, HostileSchemasFailCleanly) {
  // Deep nesting.
  std::string deep = R"({"type":"string"})";
  for (int i = 0; i < 5000; ++i) deep = R"({"type":"array","items":)" + deep + "}";
  EXPECT_THAT(CompileError(deep).message(), HasSubstr("nested deeper"));
  // A required self-reference has no finite instance.
  EXPECT_THAT(CompileError(R"({"type":"object","properties":{"next":{"$ref":"#"}},
                               "required":["next"]})")
                  .message(),
              HasSubstr("no finite output"));
  // Mutual recursion through $defs, exponential if refs were inlined naively.
  absl::Status wide = CompileError(R"({"$defs":{
      "a":{"type":"array","items":{"anyOf":[{"$ref":"#/$defs/b"},{"$ref":"#/$defs/b"}]}},
      "b":{"type":"array","items":{"anyOf":[{"$ref":"#/$defs/a"},{"$ref":"#/$defs/a"}]}}},
      "$ref":"#/$defs/a"})");
  EXPECT_TRUE(wide.ok()) << wide;
  // Huge enums and grammars are bounded.
  Json big = {{"enum", Json::array()}};
  for (int i = 0; i < 100000; ++i) big["enum"].push_back("value number " + std::to_string(i));
  GrammarOptions small;
  small.max_grammar_size = 10000;
  EXPECT_THAT(CompileJsonSchema(big, small).status().message(), HasSubstr("max_grammar_size"));
  EXPECT_TRUE(CompileJsonSchema(big).ok());
}

TEST(JsonSchemaTest, ObjectsFollowDeclaredOrder) {
  const std::string schema = R"({"type":"object","properties":{
      "a":{"type":"integer"},"b":{"type":"boolean"},"c":{"type":"null"}},
      "required":["b"],"additionalProperties":false})";
  EXPECT_TRUE(Matches(schema, R"({"b":true})"));
  EXPECT_TRUE(Matches(schema, R"({"a":1,"b":false,"c":null})"));
  EXPECT_TRUE(Matches(schema, "{\n  \"a\": -7,\n  \"b\": true\n}"));
  EXPECT_FALSE(Matches(schema, R"({"b":true,"a":1})"));  // declared order only
  EXPECT_FALSE(Matches(schema, R"({"a":1})"));           // b is required
  EXPECT_FALSE(Matches(schema, R"({"b":true,"d":1})"));  // no additional properties
  EXPECT_FALSE(Matches(schema, R"({"a":1.5,"b":true})"));
  EXPECT_FALSE(Matches(schema, R"({"b":true,})"));
}

// The bytes that may come next after `prefix` (a valid prefix of `schema`).
std::string AllowedBytes(const std::string& schema, const std::string& prefix) {
  absl::StatusOr<Grammar> g = CompileJsonSchema(Json::parse(schema));
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return "";
  GrammarMatcher m(*g, std::make_shared<const TokenVocabulary>(testing::ByteVocab()));
  EXPECT_TRUE(m.AcceptBytes(prefix).ok()) << prefix;
  std::vector<uint8_t> allowed;
  m.FillMask(&allowed);
  std::string bytes;
  for (int c = 0; c < 256; ++c) {
    if (allowed[c] == 1) bytes.push_back(static_cast<char>(c));
  }
  return bytes;
}

// Issue 38: with additionalProperties left out, an object that lists
// `properties` has only those (as llama.cpp's json-schema-to-grammar does),
// so a weak model can close it instead of inventing keys until max_tokens.
TEST(JsonSchemaTest, ObjectsWithoutAdditionalPropertiesCloseAfterDeclaredKeys) {
  const std::string schema = R"({"type":"object","properties":{
      "a":{"type":"integer"},"b":{"type":"boolean"}},"required":["a"]})";
  EXPECT_TRUE(Matches(schema, R"({"a":1})"));
  EXPECT_TRUE(Matches(schema, R"({"a":1,"b":true})"));
  EXPECT_FALSE(Matches(schema, R"({"a":1,"c":2})"));  // no extra key
  EXPECT_FALSE(Matches(schema, R"({"a":1,"b":true,"c":2})"));
  EXPECT_FALSE(Matches(schema, R"({"b":true})"));  // a is still required
  EXPECT_FALSE(Matches(schema, R"({"b":true,"a":1})"));
  // After the last declared key only the close (or whitespace) may follow;
  // after the required one, the optional one or the close.
  EXPECT_EQ(AllowedBytes(schema, R"({"a":1,"b":true)"), "\n }");
  EXPECT_EQ(AllowedBytes(schema, R"({"a":1,)"), "\n \"");
  EXPECT_EQ(AllowedBytes(schema, R"({"a":1,")"), "b");
  // An empty `properties` is the empty object; no `properties` is any object.
  EXPECT_TRUE(Matches(R"({"type":"object","properties":{}})", "{}"));
  EXPECT_FALSE(Matches(R"({"type":"object","properties":{}})", R"({"a":1})"));
  EXPECT_TRUE(Matches(R"({"type":"object"})", R"({"a":1})"));
  EXPECT_TRUE(Matches(R"({"type":"object","description":"d"})", R"({"a":{"b":[]}})"));
  // Untyped schemas narrowed to objects by `properties` close too.
  EXPECT_FALSE(Matches(R"({"properties":{"a":{}}})", R"({"a":1,"b":2})"));
  EXPECT_TRUE(Matches(R"({"properties":{"a":{}}})", R"({"a":[1]})"));
}

TEST(JsonSchemaTest, AdditionalPropertiesTrueOrASchemaStillAllowsMore) {
  const std::string open = R"({"type":"object","properties":{"a":{"type":"integer"}},
                               "required":["a"],"additionalProperties":true})";
  EXPECT_TRUE(Matches(open, R"({"a":1,"c":[2,{"d":null}]})"));
  EXPECT_TRUE(Matches(open, R"({"a":1})"));
  EXPECT_EQ(AllowedBytes(open, R"({"a":1)"), "\n ,0123456789}");
  EXPECT_TRUE(Matches(R"({"type":"object","properties":{"a":{}},"additionalProperties":{}})",
                      R"({"a":1,"b":2})"));
  const std::string closed = R"({"type":"object","properties":{"a":{"type":"integer"}},
                                 "additionalProperties":false})";
  EXPECT_FALSE(Matches(closed, R"({"a":1,"c":2})"));
  EXPECT_EQ(AllowedBytes(closed, R"({"a":1)"), "\n 0123456789}");
}

TEST(JsonSchemaTest, NestedObjectsCloseUnlessTheyAllowMore) {
  const std::string schema = R"({"type":"object","properties":{
      "in":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]},
      "open":{"type":"object","properties":{"y":{"type":"integer"}},"additionalProperties":true},
      "list":{"type":"array","items":{"type":"object","properties":{"k":{"type":"string"}}}},
      "free":{"type":"object"}},
      "required":["in"]})";
  EXPECT_TRUE(Matches(schema, R"({"in":{"x":1}})"));
  EXPECT_FALSE(Matches(schema, R"({"in":{"x":1,"z":2}})"));
  EXPECT_FALSE(Matches(schema, R"({"in":{"x":1},"z":2})"));
  EXPECT_TRUE(Matches(schema, R"({"in":{"x":1},"open":{"y":1,"z":[2]}})"));
  EXPECT_TRUE(Matches(schema, R"({"in":{"x":1},"list":[{"k":"v"},{}]})"));
  EXPECT_FALSE(Matches(schema, R"({"in":{"x":1},"list":[{"k":"v","j":1}]})"));
  EXPECT_TRUE(Matches(schema, R"({"in":{"x":1},"free":{"anything":true}})"));
  EXPECT_EQ(AllowedBytes(schema, R"({"in":{"x":1)"), "\n 0123456789}");
  // The same through a $ref.
  const std::string ref = R"({"$defs":{"p":{"type":"object","properties":{"x":{"type":"integer"}}}},
      "type":"object","properties":{"p":{"$ref":"#/$defs/p"}}})";
  EXPECT_TRUE(Matches(ref, R"({"p":{"x":1}})"));
  EXPECT_FALSE(Matches(ref, R"({"p":{"x":1,"y":2}})"));
}

TEST(JsonSchemaTest, AdditionalPropertiesNeverRepeatDeclaredKeys) {
  const std::string schema = R"({"type":"object","properties":{"a":{"type":"integer"}},
                                 "additionalProperties":{"type":"string"}})";
  EXPECT_TRUE(Matches(schema, R"({"a":1,"ab":"x","b":"y"})"));
  EXPECT_TRUE(Matches(schema, R"({"b":"y"})"));
  EXPECT_FALSE(Matches(schema, R"({"a":1,"a":"x"})"));
  EXPECT_FALSE(Matches(schema, R"({"b":1})"));
  EXPECT_TRUE(Matches(R"({"type":"object"})", R"({"x":[1,{"y":null}],"z":"w"})"));
}

TEST(JsonSchemaTest, ScalarsEnumsAndUnions) {
  EXPECT_TRUE(Matches(R"({"type":"number"})", "-0.5e+10"));
  EXPECT_TRUE(Matches(R"({"type":"number"})", "0"));
  EXPECT_FALSE(Matches(R"({"type":"number"})", "01"));
  EXPECT_FALSE(Matches(R"({"type":"number"})", "1."));
  EXPECT_FALSE(Matches(R"({"type":"number"})", "1e999"));  // exponent digits bounded
  EXPECT_FALSE(Matches(R"({"type":"integer"})", "12345678901234567"));
  EXPECT_TRUE(Matches(R"({"enum":["red","green",1,null,{"k":[true]}]})", R"({"k":[true]})"));
  EXPECT_FALSE(Matches(R"({"enum":["red","green"]})", R"("gree")"));
  EXPECT_TRUE(Matches(R"({"const":"é"})", "\"\xC3\xA9\""));
  EXPECT_TRUE(Matches(R"({"type":["string","null"]})", "null"));
  EXPECT_TRUE(Matches(R"({"type":"string","enum":["a",1]})", R"("a")"));
  EXPECT_TRUE(Matches(R"({"anyOf":[{"type":"integer"},{"type":"boolean"}]})", "false"));
  EXPECT_FALSE(Matches(R"({"oneOf":[{"type":"integer"},{"type":"boolean"}]})", "\"x\""));
  EXPECT_TRUE(Matches(R"({"allOf":[{"type":"boolean"}],"description":"d"})", "true"));
  EXPECT_TRUE(Matches(R"({"type":"array","items":{"type":"integer"},"minItems":2,
                          "maxItems":3})",
                      "[1, 2,3]"));
  EXPECT_FALSE(Matches(R"({"type":"array","minItems":2,"maxItems":3})", "[1]"));
  EXPECT_FALSE(Matches(R"({"type":"array","minItems":2,"maxItems":3})", "[1,2,3,4]"));
  EXPECT_TRUE(Matches(R"({"type":"array","items":false})", "[]"));
  EXPECT_TRUE(Matches(R"({"maxLength":1})", R"("x")"));  // untyped: narrowed to string
  EXPECT_TRUE(Matches(R"({})", R"([{"a":"b"}])"));
  EXPECT_TRUE(Matches(R"(true)", R"(12)"));
}

TEST(JsonSchemaTest, IntegerBounds) {
  const std::string range = R"({"type":"integer","minimum":-5,"maximum":12})";
  for (const char* ok : {"-5", "0", "1", "9", "12", "-1"}) EXPECT_TRUE(Matches(range, ok)) << ok;
  for (const char* bad : {"-6", "13", "120", "-0", "-", "01", "1.0"}) {
    EXPECT_FALSE(Matches(range, bad)) << bad;
  }
  const std::string positive = R"({"type":"integer","exclusiveMinimum":0})";
  EXPECT_TRUE(Matches(positive, "1"));
  EXPECT_TRUE(Matches(positive, "999999999999"));
  EXPECT_FALSE(Matches(positive, "0"));
  EXPECT_FALSE(Matches(positive, "-1"));
  const std::string narrow = R"({"type":"integer","minimum":100,"exclusiveMaximum":106})";
  EXPECT_TRUE(Matches(narrow, "105"));
  EXPECT_FALSE(Matches(narrow, "106"));
  EXPECT_FALSE(Matches(narrow, "10"));  // a prefix of valid values, not one itself
  EXPECT_FALSE(Matches(narrow, "99"));
  EXPECT_TRUE(Matches(R"({"minimum":3})", "3"));  // untyped: narrowed to integers
  EXPECT_FALSE(Matches(R"({"minimum":3})", "2"));
  EXPECT_TRUE(Matches(R"({"type":"string","minimum":3})", R"("x")"));  // not for strings
  EXPECT_THAT(CompileError(R"({"type":"number","minimum":0})").message(), HasSubstr("minimum"));
  EXPECT_THAT(CompileError(R"({"type":"integer","minimum":5,"maximum":4})").message(),
              HasSubstr("no integer"));
}

TEST(JsonSchemaTest, RecursiveRefsAreUnrolledToTheDepthLimit) {
  const std::string tree = R"({"$defs":{"node":{"type":"object","properties":{
      "v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},
      "required":["v"],"additionalProperties":false}},"$ref":"#/$defs/node"})";
  GrammarOptions options;
  options.max_ref_depth = 3;
  EXPECT_TRUE(Matches(tree, R"({"v":1,"kids":[{"v":2,"kids":[{"v":3}]}]})", options));
  EXPECT_FALSE(
      Matches(tree, R"({"v":1,"kids":[{"v":2,"kids":[{"v":3,"kids":[{"v":4}]}]}]})", options));
}

TEST(JsonSchemaTest, ResponseFormat) {
  auto text = CompileResponseFormat(Json{{"type", "text"}});
  ASSERT_TRUE(text.ok());
  EXPECT_FALSE(text->has_value());
  auto object = CompileResponseFormat(Json{{"type", "json_object"}});
  ASSERT_TRUE(object.ok());
  EXPECT_TRUE(object->has_value());
  auto schema = CompileResponseFormat(Json::parse(R"({"type":"json_schema","json_schema":{
      "name":"x","strict":true,"schema":{"type":"object","properties":{"a":{"type":"string"}},
      "required":["a"],"additionalProperties":false}}})"));
  ASSERT_TRUE(schema.ok()) << schema.status();
  EXPECT_TRUE(schema->has_value());
  for (const char* bad :
       {R"({"type":"json"})", R"({"type":"json_schema"})",
        R"({"type":"json_schema","json_schema":{"name":"x"}})",
        R"({"type":"json_schema","json_schema":{"schema":{"type":"x"}}})", R"([])"}) {
    EXPECT_EQ(CompileResponseFormat(Json::parse(bad)).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

}  // namespace
}  // namespace ringlm::grammar
