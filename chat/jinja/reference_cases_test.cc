// Expected strings in this file were produced by the reference, Python's
// jinja2 3.1.2 in Hugging Face's environment (tests/templates/check_templates.py
// make_env), not by this engine.
#include <string>

#include "absl/time/time.h"
#include "chat/jinja/template.h"
#include "chat/jinja/test_util.h"
#include "gtest/gtest.h"

namespace ringlm::jinja {
namespace {

nlohmann::ordered_json Vars(std::string_view json) { return nlohmann::ordered_json::parse(json); }

absl::StatusOr<std::string> RenderFixed(std::string_view source,
                                        const nlohmann::ordered_json& vars) {
  RenderOptions options;
  // The reference renders with strftime_now pinned to this time.
  absl::Time now = absl::FromCivil(absl::CivilSecond(2026, 7, 26, 12, 0, 0), absl::UTCTimeZone());
  options.now = [now] { return now; };
  options.time_zone = absl::UTCTimeZone();
  return testing::Render(source, vars, nullptr, options);
}

std::string R(std::string_view source, const nlohmann::ordered_json& vars) {
  absl::StatusOr<std::string> out = RenderFixed(source, vars);
  EXPECT_TRUE(out.ok()) << source << ": " << out.status();
  return out.ok() ? *out : "<error>";
}

TEST(JinjaReferenceTest, Literals) {
  EXPECT_EQ(R("{{ 1 }}|{{ -2 }}|{{ 1.5 }}|{{ 1e3 }}|{{ 'a' 'b' }}|{{ \"q\\\"\" }}|{{ true }}|{{ "
              "True }}|{{ none }}|{{ None }}|{{ [1, 'a', none] }}|{{ {'k': 'v', 'n': 1} }}|{{ (1,) "
              "}}|{{ (1, 2) }}|{{ () }}",
              nullptr),
            "1|-2|1.5|1000.0|ab|q\"|True|True|None|None|[1, 'a', None]|{'k': 'v', 'n': 1}|(1,)|(1, "
            "2)|()");
}

TEST(JinjaReferenceTest, Arith) {
  EXPECT_EQ(R("{{ 7 + 3 }} {{ 7 - 10 }} {{ 7 * 3 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % "
              "3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7.5 // 2 }} {{ 1 + 1.5 }} {{ 0.1 + "
              "0.2 }} {{ 10 / 4 }} {{ true + 1 }}",
              nullptr),
            "10 -3 21 3.5 3 -4 1 2 1024 0.5 3.0 2.5 0.30000000000000004 2.5 2");
}

// jinja2: TypeError: can only concatenate str (not "int") to str
TEST(JinjaReferenceTest, Precedence) {
  EXPECT_FALSE(
      RenderFixed("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ not 1 == 2 "
                  "}} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 ~ 2 + 3 }} {{ 'a' ~ 1 * 2 }}",
                  nullptr)
          .ok());
}

TEST(JinjaReferenceTest, ConcatTilde) {
  EXPECT_EQ(R("{{ 'a' ~ 1 ~ none ~ true ~ undefined_var ~ [1] }}", nullptr), "a1NoneTrue[1]");
}

TEST(JinjaReferenceTest, AndOr) {
  EXPECT_EQ(R("{{ 0 or 'x' }}|{{ 1 and 'y' }}|{{ '' or [] }}|{{ none and 1 }}|{{ not none }}|{{ 1 "
              "if 0 else 2 }}|{{ 'yes' if t }}|{{ 'no' if not t }}|",
              nullptr),
            "x|y|[]|None|True|2||no|");
}

TEST(JinjaReferenceTest, Compare) {
  EXPECT_EQ(R("{{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 'ab' in 'cabd' }} {{ 2 in l "
              "}} {{ 'a' in d }} {{ 'z' not in d }} {{ d == {'a': 1, 'b': [1, 2], 'c': {'x': 'y'}} "
              "}} {{ none == none }} {{ 1 != 2 }}",
              Vars("{\"d\": {\"a\": 1, \"b\": [1, 2], \"c\": {\"x\": \"y\"}}, \"s\": \"  Hello "
                   "World  \", \"n\": null, \"l\": [3, 1, 2], \"words\": [\"b\", \"A\", \"a\", "
                   "\"C\"], \"users\": [{\"name\": \"Bob\", \"age\": 30, \"role\": \"user\"}, "
                   "{\"name\": \"alice\", \"age\": 25, \"role\": \"admin\"}, {\"name\": \"Carl\", "
                   "\"age\": 35, \"role\": \"user\"}], \"t\": true, \"f\": 1.5, \"i\": 7, \"e\": "
                   "\"\", \"u8\": \"h\303\251llo w\303\266rld \342\234\223\"}")),
            "True True True True True True True True True True");
}

TEST(JinjaReferenceTest, AttrItem) {
  EXPECT_EQ(R("{{ d.a }} {{ d['b'][1] }} {{ d.c.x }} {{ d.b.0 }} {{ d.zz }}|{{ l[-1] }} {{ l[10] "
              "}}|{{ s[2] }} {{ n.x }}|{{ d['items'] is defined }}",
              Vars("{\"d\": {\"a\": 1, \"b\": [1, 2], \"c\": {\"x\": \"y\"}}, \"s\": \"  Hello "
                   "World  \", \"n\": null, \"l\": [3, 1, 2], \"words\": [\"b\", \"A\", \"a\", "
                   "\"C\"], \"users\": [{\"name\": \"Bob\", \"age\": 30, \"role\": \"user\"}, "
                   "{\"name\": \"alice\", \"age\": 25, \"role\": \"admin\"}, {\"name\": \"Carl\", "
                   "\"age\": 35, \"role\": \"user\"}], \"t\": true, \"f\": 1.5, \"i\": 7, \"e\": "
                   "\"\", \"u8\": \"h\303\251llo w\303\266rld \342\234\223\"}")),
            "1 2 y 1 |2 |H |True");
}

TEST(JinjaReferenceTest, Slices) {
  EXPECT_EQ(R("{{ l[1:] }} {{ l[:-1] }} {{ l[::-1] }} {{ l[::2] }} {{ l[5:] }} {{ 'abcdef'[1:4] }} "
              "{{ 'abcdef'[::-2] }} {{ u8[1:3] }} {{ u8[::-1] }} {{ l[-10:2] }} {{ 'abc'[:] }}",
              Vars("{\"d\": {\"a\": 1, \"b\": [1, 2], \"c\": {\"x\": \"y\"}}, \"s\": \"  Hello "
                   "World  \", \"n\": null, \"l\": [3, 1, 2], \"words\": [\"b\", \"A\", \"a\", "
                   "\"C\"], \"users\": [{\"name\": \"Bob\", \"age\": 30, \"role\": \"user\"}, "
                   "{\"name\": \"alice\", \"age\": 25, \"role\": \"admin\"}, {\"name\": \"Carl\", "
                   "\"age\": 35, \"role\": \"user\"}], \"t\": true, \"f\": 1.5, \"i\": 7, \"e\": "
                   "\"\", \"u8\": \"h\303\251llo w\303\266rld \342\234\223\"}")),
            "[1, 2] [3, 1] [2, 1, 3] [3, 2] [] bcd fdb \303\251l \342\234\223 dlr\303\266w "
            "oll\303\251h [3, 1] abc");
}

TEST(JinjaReferenceTest, IfElif) {
  EXPECT_EQ(R("{% for x in [0, 1, 2, 3] %}{% if x == 0 %}zero{% elif x == 1 %}one{% elif x == 2 "
              "%}two{% else %}many{% endif %},{% endfor %}",
              nullptr),
            "zero,one,two,many,");
}

TEST(JinjaReferenceTest, ForLoopVars) {
  EXPECT_EQ(R("{% for x in ['a', 'b', 'c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex "
              "}}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ "
              "loop.previtem }}{{ loop.nextitem }}{{ loop.cycle('x', 'y') }};{% endfor %}",
              nullptr),
            "1032TrueFalse3bx;2121FalseFalse3acy;3210FalseTrue3bx;");
}

TEST(JinjaReferenceTest, ForElse) {
  EXPECT_EQ(R("{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in undefined_thing %}x{% "
              "else %}undef{% endfor %}",
              nullptr),
            "empty|undef");
}

TEST(JinjaReferenceTest, ForFilter) {
  EXPECT_EQ(R("{% for x in range(10) if x is odd %}{{ x }}{{ loop.length }},{% endfor %}", nullptr),
            "15,35,55,75,95,");
}

TEST(JinjaReferenceTest, ForUnpack) {
  EXPECT_EQ(R("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for a, b in [(1, 2), [3, "
              "4]] %}{{ a + b }}{% endfor %}{% for k in d %}{{ k }}{% endfor %}",
              Vars("{\"d\": {\"a\": 1, \"b\": [1, 2], \"c\": {\"x\": \"y\"}}, \"s\": \"  Hello "
                   "World  \", \"n\": null, \"l\": [3, 1, 2], \"words\": [\"b\", \"A\", \"a\", "
                   "\"C\"], \"users\": [{\"name\": \"Bob\", \"age\": 30, \"role\": \"user\"}, "
                   "{\"name\": \"alice\", \"age\": 25, \"role\": \"admin\"}, {\"name\": \"Carl\", "
                   "\"age\": 35, \"role\": \"user\"}], \"t\": true, \"f\": 1.5, \"i\": 7, \"e\": "
                   "\"\", \"u8\": \"h\303\251llo w\303\266rld \342\234\223\"}")),
            "a=1;b=[1, 2];c={'x': 'y'};37abc");
}

TEST(JinjaReferenceTest, BreakContinue) {
  EXPECT_EQ(R("{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% "
              "break %}{% endif %}{{ x }}{% endfor %}",
              nullptr),
            "0134");
}

TEST(JinjaReferenceTest, Scoping) {
  EXPECT_EQ(R("{% set x = 0 %}{% for i in range(3) %}{{ x }}{% set x = i %}{{ x }}{% endfor %}{{ x "
              "}}|{% if true %}{% set y = 5 %}{% endif %}{{ y }}",
              nullptr),
            "0001020|5");
}

TEST(JinjaReferenceTest, Namespace) {
  EXPECT_EQ(
      R("{% set ns = namespace(count=0, items='') %}{% for i in range(4) %}{% set ns.count = "
        "ns.count + i %}{% set ns.items = ns.items ~ i %}{% endfor %}{{ ns.count }} {{ ns.items }}",
        nullptr),
      "6 0123");
}

TEST(JinjaReferenceTest, SetBlock) {
  EXPECT_EQ(R("{% set greeting %}Hello {{ 'world' }}!{% endset %}[{{ greeting }}]{% set up | upper "
              "%}shout{% endset %}{{ up }}",
              nullptr),
            "[Hello world!]SHOUT");
}

TEST(JinjaReferenceTest, SetTuple) {
  EXPECT_EQ(R("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c = 1, 2 %}{{ c }}", nullptr), "12(1, 2)");
}

TEST(JinjaReferenceTest, Macro) {
  EXPECT_EQ(
      R("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Bob') "
        "}} {{ greet('Al', punct='?') }} {{ greet(punct='.', name='Zed') }} {{ greet() }}",
        nullptr),
      "Hi Bob! Hi Al? Hi Zed. Hi !");
}

TEST(JinjaReferenceTest, MacroRecursive) {
  EXPECT_EQ(R("{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% "
              "endmacro %}{{ fact(5) }}",
              nullptr),
            "120");
}

TEST(JinjaReferenceTest, FilterBlock) {
  EXPECT_EQ(R("{% filter upper %}hello {{ 'x' }}{% endfilter %}|{% filter trim %}  padded  {% "
              "endfilter %}|",
              nullptr),
            "HELLO X|padded|");
}

TEST(JinjaReferenceTest, RawComment) {
  EXPECT_EQ(R("a{# comment {{ x }} #}b{% raw %}{{ not_evaluated }}{% endraw %}c", nullptr),
            "ab{{ not_evaluated }}c");
}

TEST(JinjaReferenceTest, Generation) {
  EXPECT_EQ(R("{% generation %}gen {{ 1 }}{% endgeneration %}", nullptr), "gen 1");
}

TEST(JinjaReferenceTest, With) {
  EXPECT_EQ(R("{% with a = 1, b = 'x' %}{{ a }}{{ b }}{% endwith %}{{ a }}", nullptr), "1x");
}

TEST(JinjaReferenceTest, WsTrimLstrip) {
  EXPECT_EQ(
      R("<ul>\n  {% for x in [1, 2] %}\n    <li>{{ x }}</li>\n  {% endfor %}\n</ul>\n", nullptr),
      "<ul>\n    <li>1</li>\n    <li>2</li>\n</ul>");
}

TEST(JinjaReferenceTest, WsMinus) {
  EXPECT_EQ(
      R("a  \n  {{- 'b' -}}  \n  c {%- if true -%}  d  {%- endif -%}  e\n  {#- c -#}  f", nullptr),
      "abcdef");
}

TEST(JinjaReferenceTest, WsPlus) {
  EXPECT_EQ(R("x\n    {%+ if true %}y{% endif %}\n  {% if true +%}\nz{% endif %}", nullptr),
            "x\n    y\nz");
}

TEST(JinjaReferenceTest, WsVarNoLstrip) {
  EXPECT_EQ(R("line\n    {{ 'v' }}\n    {% if true %}\n    kept\n    {% endif %}\nend", nullptr),
            "line\n    v\n    kept\nend");
}

TEST(JinjaReferenceTest, WsCommentLstrip) { EXPECT_EQ(R("a\n    {# c #}\nb", nullptr), "a\nb"); }

TEST(JinjaReferenceTest, WsTrailingNewline) { EXPECT_EQ(R("x\n", nullptr), "x"); }

TEST(JinjaReferenceTest, WsCrlf) {
  EXPECT_EQ(R("a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc", nullptr), "a\nb\nc");
}

TEST(JinjaReferenceTest, FiltersStr) {
  EXPECT_EQ(R("{{ s|trim }}|{{ s|upper }}|{{ s|lower }}|{{ s|title }}|{{ 'hELLO wORLD'|capitalize "
              "}}|{{ s|length }}|{{ u8|length }}|{{ s|replace('l', 'L') }}|{{ 'aaa'|replace('a', "
              "'b', 2) }}|{{ 'x-y'|trim('x') }}|{{ 'a b  c'|wordcount }}",
              Vars("{\"d\": {\"a\": 1, \"b\": [1, 2], \"c\": {\"x\": \"y\"}}, \"s\": \"  Hello "
                   "World  \", \"n\": null, \"l\": [3, 1, 2], \"words\": [\"b\", \"A\", \"a\", "
                   "\"C\"], \"users\": [{\"name\": \"Bob\", \"age\": 30, \"role\": \"user\"}, "
                   "{\"name\": \"alice\", \"age\": 25, \"role\": \"admin\"}, {\"name\": \"Carl\", "
                   "\"age\": 35, \"role\": \"user\"}], \"t\": true, \"f\": 1.5, \"i\": 7, \"e\": "
                   "\"\", \"u8\": \"h\303\251llo w\303\266rld \342\234\223\"}")),
            "Hello World|  HELLO WORLD  |  hello world  |  Hello World  |Hello world|15|13|  HeLLo "
            "WorLd  |bba|-y|3");
}

TEST(JinjaReferenceTest, FiltersDefault) {
  EXPECT_EQ(
      R("{{ missing|default('dflt') }}|{{ missing|d('d2') }}|{{ e|default('empty') }}|{{ "
        "e|default('empty', true) }}|{{ n|default('none') }}|{{ n|default('none', boolean=true) }}",
        Vars("{\"d\": {\"a\": 1, \"b\": [1, 2], \"c\": {\"x\": \"y\"}}, \"s\": \"  Hello World  "
             "\", \"n\": null, \"l\": [3, 1, 2], \"words\": [\"b\", \"A\", \"a\", \"C\"], "
             "\"users\": [{\"name\": \"Bob\", \"age\": 30, \"role\": \"user\"}, {\"name\": "
             "\"alice\", \"age\": 25, \"role\": \"admin\"}, {\"name\": \"Carl\", \"age\": 35, "
             "\"role\": \"user\"}], \"t\": true, \"f\": 1.5, \"i\": 7, \"e\": \"\", \"u8\": "
             "\"h\303\251llo w\303\266rld \342\234\223\"}")),
      "dflt|d2||empty|None|none");
}

TEST(JinjaReferenceTest, FiltersList) {
  EXPECT_EQ(R("{{ l|first }} {{ l|last }} {{ l|length }} {{ l|count }} {{ l|join(', ') }} {{ "
              "l|sort }} {{ l|sort(reverse=true) }} {{ l|reverse|list }} {{ l|min }} {{ l|max }} "
              "{{ l|sum }} {{ l|list }} {{ 'abc'|list }} {{ d|list }}",
              Vars("{\"d\": {\"a\": 1, \"b\": [1, 2], \"c\": {\"x\": \"y\"}}, \"s\": \"  Hello "
                   "World  \", \"n\": null, \"l\": [3, 1, 2], \"words\": [\"b\", \"A\", \"a\", "
                   "\"C\"], \"users\": [{\"name\": \"Bob\", \"age\": 30, \"role\": \"user\"}, "
                   "{\"name\": \"alice\", \"age\": 25, \"role\": \"admin\"}, {\"name\": \"Carl\", "
                   "\"age\": 35, \"role\": \"user\"}], \"t\": true, \"f\": 1.5, \"i\": 7, \"e\": "
                   "\"\", \"u8\": \"h\303\251llo w\303\266rld \342\234\223\"}")),
            "3 2 3 3 3, 1, 2 [1, 2, 3] [3, 2, 1] [2, 1, 3] 1 3 6 [3, 1, 2] ['a', 'b', 'c'] ['a', "
            "'b', 'c']");
}

TEST(JinjaReferenceTest, FiltersSortWords) {
  EXPECT_EQ(R("{{ words|sort }} {{ words|sort(case_sensitive=true) }} {{ words|unique|list }} {{ "
              "words|unique(case_sensitive=true)|list }} {{ words|min }} {{ words|max }}",
              Vars("{\"d\": {\"a\": 1, \"b\": [1, 2], \"c\": {\"x\": \"y\"}}, \"s\": \"  Hello "
                   "World  \", \"n\": null, \"l\": [3, 1, 2], \"words\": [\"b\", \"A\", \"a\", "
                   "\"C\"], \"users\": [{\"name\": \"Bob\", \"age\": 30, \"role\": \"user\"}, "
                   "{\"name\": \"alice\", \"age\": 25, \"role\": \"admin\"}, {\"name\": \"Carl\", "
                   "\"age\": 35, \"role\": \"user\"}], \"t\": true, \"f\": 1.5, \"i\": 7, \"e\": "
                   "\"\", \"u8\": \"h\303\251llo w\303\266rld \342\234\223\"}")),
            "['A', 'a', 'b', 'C'] ['A', 'C', 'a', 'b'] ['b', 'A', 'C'] ['b', 'A', 'a', 'C'] A C");
}

TEST(JinjaReferenceTest, FiltersAttr) {
  EXPECT_EQ(
      R("{{ users|map(attribute='name')|join(',') }}|{{ users|selectattr('role', 'equalto', "
        "'user')|map(attribute='name')|list }}|{{ users|rejectattr('age', 'lt', "
        "30)|map(attribute='name')|list }}|{{ "
        "users|sort(attribute='age')|map(attribute='name')|join }}|{{ users|sum(attribute='age') "
        "}}|{{ users|min(attribute='age') }}|{{ users|selectattr('missing', "
        "'undefined')|list|length }}|{{ users|selectattr('role')|list|length }}",
        Vars("{\"d\": {\"a\": 1, \"b\": [1, 2], \"c\": {\"x\": \"y\"}}, \"s\": \"  Hello World  "
             "\", \"n\": null, \"l\": [3, 1, 2], \"words\": [\"b\", \"A\", \"a\", \"C\"], "
             "\"users\": [{\"name\": \"Bob\", \"age\": 30, \"role\": \"user\"}, {\"name\": "
             "\"alice\", \"age\": 25, \"role\": \"admin\"}, {\"name\": \"Carl\", \"age\": 35, "
             "\"role\": \"user\"}], \"t\": true, \"f\": 1.5, \"i\": 7, \"e\": \"\", \"u8\": "
             "\"h\303\251llo w\303\266rld \342\234\223\"}")),
      "Bob,alice,Carl|['Bob', 'Carl']|['Bob', 'Carl']|aliceBobCarl|90|{'name': 'alice', 'age': 25, "
      "'role': 'admin'}|3|3");
}

TEST(JinjaReferenceTest, FiltersSelect) {
  EXPECT_EQ(R("{{ range(10)|select('odd')|list }} {{ range(10)|reject('even')|list }} {{ [0, 1, "
              "'', 'a', none]|select|list }} {{ range(10)|select('divisibleby', 3)|list }} {{ "
              "range(5)|map('string')|join('-') }}",
              nullptr),
            "[1, 3, 5, 7, 9] [1, 3, 5, 7, 9] [1, 'a'] [0, 3, 6, 9] 0-1-2-3-4");
}

TEST(JinjaReferenceTest, FiltersItems) {
  EXPECT_EQ(R("{{ d|items|list }} {{ {'b': 1, 'a': 2}|dictsort }} {{ {'b': 1, 'a': "
              "2}|dictsort(by='value') }} {{ {'b': 1, 'a': 2}|dictsort(reverse=true) }}",
              Vars("{\"d\": {\"a\": 1, \"b\": [1, 2], \"c\": {\"x\": \"y\"}}, \"s\": \"  Hello "
                   "World  \", \"n\": null, \"l\": [3, 1, 2], \"words\": [\"b\", \"A\", \"a\", "
                   "\"C\"], \"users\": [{\"name\": \"Bob\", \"age\": 30, \"role\": \"user\"}, "
                   "{\"name\": \"alice\", \"age\": 25, \"role\": \"admin\"}, {\"name\": \"Carl\", "
                   "\"age\": 35, \"role\": \"user\"}], \"t\": true, \"f\": 1.5, \"i\": 7, \"e\": "
                   "\"\", \"u8\": \"h\303\251llo w\303\266rld \342\234\223\"}")),
            "[('a', 1), ('b', [1, 2]), ('c', {'x': 'y'})] [('a', 2), ('b', 1)] [('b', 1), ('a', "
            "2)] [('b', 1), ('a', 2)]");
}

TEST(JinjaReferenceTest, FiltersNum) {
  EXPECT_EQ(R("{{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(-1) }} {{ 3.9|int }} {{ "
              "'1.5'|float }} {{ 'q'|float }} {{ -3|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ "
              "2.675|round(2) }} {{ 2.1|round(method='ceil') }} {{ 2.9|round(0, 'floor') }} {{ "
              "3|round }} {{ '0x1A'|int(0, 16) }} {{ ' 12 '|int }}",
              nullptr),
            "42 4 0 -1 3 1.5 0.0 3 2.0 4.0 2.67 3.0 2.0 3 26 12");
}

TEST(JinjaReferenceTest, FiltersStringConv) {
  EXPECT_EQ(R("{{ 1|string ~ '' }} {{ none|string }} {{ [1, 'a']|string }} {{ d|string }} {{ "
              "1.0|string }} {{ true|string }}",
              Vars("{\"d\": {\"a\": 1, \"b\": [1, 2], \"c\": {\"x\": \"y\"}}, \"s\": \"  Hello "
                   "World  \", \"n\": null, \"l\": [3, 1, 2], \"words\": [\"b\", \"A\", \"a\", "
                   "\"C\"], \"users\": [{\"name\": \"Bob\", \"age\": 30, \"role\": \"user\"}, "
                   "{\"name\": \"alice\", \"age\": 25, \"role\": \"admin\"}, {\"name\": \"Carl\", "
                   "\"age\": 35, \"role\": \"user\"}], \"t\": true, \"f\": 1.5, \"i\": 7, \"e\": "
                   "\"\", \"u8\": \"h\303\251llo w\303\266rld \342\234\223\"}")),
            "1 None [1, 'a'] {'a': 1, 'b': [1, 2], 'c': {'x': 'y'}} 1.0 True");
}

TEST(JinjaReferenceTest, FiltersIndent) {
  EXPECT_EQ(R("{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(2, "
              "blank=true) }}|{{ 'x\\ny'|indent('> ') }}",
              nullptr),
            "a\n    b\n\n    c|  a\n  b|a\n  \n  b|x\n> y");
}

TEST(JinjaReferenceTest, FiltersTruncateBatch) {
  EXPECT_EQ(R("{{ 'hello world foo bar baz qux'|truncate(12) }}|{{ 'hello world foo bar "
              "baz'|truncate(9, true) }}|{{ 'short'|truncate(10) }}|{{ range(5)|batch(2)|list "
              "}}|{{ range(5)|batch(2, 'x')|list }}",
              nullptr),
            "hello...|hello ...|short|[[0, 1], [2, 3], [4]]|[[0, 1], [2, 3], [4, 'x']]");
}

TEST(JinjaReferenceTest, FiltersFormat) {
  EXPECT_EQ(R("{{ '%s-%d-%.2f-%5s|%-4d|%x'|format('a', 3, 1.234, 'r', 7, 255) }} {{ '%s and %s' % "
              "('x', 'y') }} {{ '%r' % 'q' }} {{ '100%%' % () }}",
              nullptr),
            "a-3-1.23-    r|7   |ff x and y 'q' 100%");
}

TEST(JinjaReferenceTest, FiltersMisc) {
  EXPECT_EQ(R("{{ '<a href=\"x\">'|e }} {{ '<b>'|safe }} {{ d|attr('a') }} {{ [1,2,3]|join }} {{ "
              "users|join(', ', attribute='name') }}",
              Vars("{\"d\": {\"a\": 1, \"b\": [1, 2], \"c\": {\"x\": \"y\"}}, \"s\": \"  Hello "
                   "World  \", \"n\": null, \"l\": [3, 1, 2], \"words\": [\"b\", \"A\", \"a\", "
                   "\"C\"], \"users\": [{\"name\": \"Bob\", \"age\": 30, \"role\": \"user\"}, "
                   "{\"name\": \"alice\", \"age\": 25, \"role\": \"admin\"}, {\"name\": \"Carl\", "
                   "\"age\": 35, \"role\": \"user\"}], \"t\": true, \"f\": 1.5, \"i\": 7, \"e\": "
                   "\"\", \"u8\": \"h\303\251llo w\303\266rld \342\234\223\"}")),
            "&lt;a href=&#34;x&#34;&gt; <b>  123 Bob, alice, Carl");
}

TEST(JinjaReferenceTest, Tojson) {
  EXPECT_EQ(R("{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ '\303\251\"\\n'|tojson }}|{{ [1.0, 1e20, "
              "1.5e-7, none, true]|tojson }}|{{ {'b': 1, 'a': [1, {}]}|tojson(sort_keys=true) "
              "}}|{{ d|tojson(separators=(',', ':')) }}|{{ '\303\251'|tojson(ensure_ascii=true) "
              "}}|{{ []|tojson(indent=2) }}",
              Vars("{\"d\": {\"a\": 1, \"b\": [1, 2], \"c\": {\"x\": \"y\"}}, \"s\": \"  Hello "
                   "World  \", \"n\": null, \"l\": [3, 1, 2], \"words\": [\"b\", \"A\", \"a\", "
                   "\"C\"], \"users\": [{\"name\": \"Bob\", \"age\": 30, \"role\": \"user\"}, "
                   "{\"name\": \"alice\", \"age\": 25, \"role\": \"admin\"}, {\"name\": \"Carl\", "
                   "\"age\": 35, \"role\": \"user\"}], \"t\": true, \"f\": 1.5, \"i\": 7, \"e\": "
                   "\"\", \"u8\": \"h\303\251llo w\303\266rld \342\234\223\"}")),
            "{\"a\": 1, \"b\": [1, 2], \"c\": {\"x\": \"y\"}}|{\n  \"a\": 1,\n  \"b\": [\n    1,\n "
            "   2\n  ],\n  \"c\": {\n    \"x\": \"y\"\n  }\n}|\"\303\251\\\"\\n\"|[1.0, 1e+20, "
            "1.5e-07, null, true]|{\"a\": [1, {}], \"b\": "
            "1}|{\"a\":1,\"b\":[1,2],\"c\":{\"x\":\"y\"}}|\"\\u00e9\"|[]");
}

TEST(JinjaReferenceTest, Tests) {
  EXPECT_EQ(R("{{ x is defined }}{{ d is defined }}{{ x is undefined }}{{ n is none }}{{ s is "
              "string }}{{ 1 is number }}{{ 1.5 is number }}{{ true is number }}{{ 1 is integer "
              "}}{{ true is integer }}{{ 1.5 is float }}{{ d is mapping }}{{ l is mapping }}{{ l "
              "is iterable }}{{ s is iterable }}{{ 1 is iterable }}{{ l is sequence }}{{ true is "
              "boolean }}{{ true is true }}{{ 1 is true }}{{ false is false }}{{ 4 is even }}{{ 3 "
              "is odd }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) }}",
              Vars("{\"d\": {\"a\": 1, \"b\": [1, 2], \"c\": {\"x\": \"y\"}}, \"s\": \"  Hello "
                   "World  \", \"n\": null, \"l\": [3, 1, 2], \"words\": [\"b\", \"A\", \"a\", "
                   "\"C\"], \"users\": [{\"name\": \"Bob\", \"age\": 30, \"role\": \"user\"}, "
                   "{\"name\": \"alice\", \"age\": 25, \"role\": \"admin\"}, {\"name\": \"Carl\", "
                   "\"age\": 35, \"role\": \"user\"}], \"t\": true, \"f\": 1.5, \"i\": 7, \"e\": "
                   "\"\", \"u8\": \"h\303\251llo w\303\266rld \342\234\223\"}")),
            "FalseTrueTrueTrueTrueTrueTrueTrueTrueFalseTrueTrueFalseTrueTrueFalseTrueTrueTrueFalseT"
            "rueTrueTrueTrueFalse");
}

TEST(JinjaReferenceTest, TestsCompare) {
  EXPECT_EQ(R("{{ 1 is eq 1 }}{{ 1 is equalto 2 }}{{ 1 is ne 2 }}{{ 1 is lt 2 }}{{ 2 is gt 1 }}{{ "
              "2 is le 2 }}{{ 2 is ge 3 }}{{ 2 is in [1, 2] }}{{ 'a' is in 'abc' }}{{ range is "
              "callable }}{{ d is callable }}{{ s.upper is callable }}{{ none is sameas none }}{{ "
              "'abc' is lower }}{{ 'ABC' is upper }}{{ x is not defined }}{{ n is not none }}",
              Vars("{\"d\": {\"a\": 1, \"b\": [1, 2], \"c\": {\"x\": \"y\"}}, \"s\": \"  Hello "
                   "World  \", \"n\": null, \"l\": [3, 1, 2], \"words\": [\"b\", \"A\", \"a\", "
                   "\"C\"], \"users\": [{\"name\": \"Bob\", \"age\": 30, \"role\": \"user\"}, "
                   "{\"name\": \"alice\", \"age\": 25, \"role\": \"admin\"}, {\"name\": \"Carl\", "
                   "\"age\": 35, \"role\": \"user\"}], \"t\": true, \"f\": 1.5, \"i\": 7, \"e\": "
                   "\"\", \"u8\": \"h\303\251llo w\303\266rld \342\234\223\"}")),
            "TrueFalseTrueTrueTrueTrueFalseTrueTrueTrueFalseTrueTrueTrueTrueTrueFalse");
}

TEST(JinjaReferenceTest, StrMethods) {
  EXPECT_EQ(R("{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ 'xxhixx'.strip('x') }}|{{ "
              "s.upper() }}|{{ s.lower() }}|{{ 'hello world'.title() }}|{{ \"they're\".title() "
              "}}|{{ 'abc'.capitalize() }}|{{ s.startswith('  H') }}|{{ s.endswith(('x', '  ')) "
              "}}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ "
              "'a,b,c'.rsplit(',', 1) }}|{{ ' a b  c '.rsplit(None, 1) }}|{{ 'aXbXc'.replace('X', "
              "'-') }}|{{ 'hello'.find('l') }}|{{ 'hello'.find('z') }}|{{ 'hello'.rfind('l') }}|{{ "
              "'hello'.count('l') }}|{{ '{} and {}'.format('a', 1) }}|{{ '{0}{1}{0}'.format('x', "
              "'y') }}|{{ '{name}!'.format(name='n') }}|{{ '-'.join(['a', 'b']) }}|{{ "
              "'l1\\nl2\\r\\nl3'.splitlines() }}|{{ 'abc'.isdigit() }}{{ '123'.isdigit() }}",
              Vars("{\"d\": {\"a\": 1, \"b\": [1, 2], \"c\": {\"x\": \"y\"}}, \"s\": \"  Hello "
                   "World  \", \"n\": null, \"l\": [3, 1, 2], \"words\": [\"b\", \"A\", \"a\", "
                   "\"C\"], \"users\": [{\"name\": \"Bob\", \"age\": 30, \"role\": \"user\"}, "
                   "{\"name\": \"alice\", \"age\": 25, \"role\": \"admin\"}, {\"name\": \"Carl\", "
                   "\"age\": 35, \"role\": \"user\"}], \"t\": true, \"f\": 1.5, \"i\": 7, \"e\": "
                   "\"\", \"u8\": \"h\303\251llo w\303\266rld \342\234\223\"}")),
            "Hello World|Hello World  |  Hello World|hi|  HELLO WORLD  |  hello world  |Hello "
            "World|They'Re|Abc|True|True|['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']|['a,b', "
            "'c']|[' a b', 'c']|a-b-c|2|-1|3|2|a and 1|xyx|n!|a-b|['l1', 'l2', 'l3']|FalseTrue");
}

TEST(JinjaReferenceTest, DictMethods) {
  EXPECT_EQ(
      R("{{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }} {{ d.get('a') }} {{ "
        "d.get('zz') }} {{ d.get('zz', 'dflt') }} {% for k, v in d|items %}{{ k }}{% endfor %}",
        Vars("{\"d\": {\"a\": 1, \"b\": [1, 2], \"c\": {\"x\": \"y\"}}, \"s\": \"  Hello World  "
             "\", \"n\": null, \"l\": [3, 1, 2], \"words\": [\"b\", \"A\", \"a\", \"C\"], "
             "\"users\": [{\"name\": \"Bob\", \"age\": 30, \"role\": \"user\"}, {\"name\": "
             "\"alice\", \"age\": 25, \"role\": \"admin\"}, {\"name\": \"Carl\", \"age\": 35, "
             "\"role\": \"user\"}], \"t\": true, \"f\": 1.5, \"i\": 7, \"e\": \"\", \"u8\": "
             "\"h\303\251llo w\303\266rld \342\234\223\"}")),
      "['a', 'b', 'c'] [1, [1, 2], {'x': 'y'}] [('a', 1), ('b', [1, 2]), ('c', {'x': 'y'})] 1 None "
      "dflt abc");
}

TEST(JinjaReferenceTest, UnicodeStrip) {
  EXPECT_EQ(R("[{{ '\\u3000\\u00a0 x \\u2003'|trim }}]", nullptr), "[x]");
}

TEST(JinjaReferenceTest, ThinkSplit) {
  EXPECT_EQ(R("{% set c = '<think>\\nreason\\n</think>\\n\\nanswer' %}{{ "
              "c.split('</think>')[-1].lstrip('\\n') }}|{{ "
              "c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}",
              nullptr),
            "answer|reason");
}

TEST(JinjaReferenceTest, StringIter) {
  EXPECT_EQ(R("{% for ch in 'h\303\251y' %}[{{ ch }}]{% endfor %}", nullptr), "[h][\303\251][y]");
}

TEST(JinjaReferenceTest, ListRepeat) {
  EXPECT_EQ(R("{{ 'ab' * 3 }} {{ [1] * 3 }} {{ 3 * 'x' }} {{ [1] + [2] }}", nullptr),
            "ababab [1, 1, 1] xxx [1, 2]");
}

TEST(JinjaReferenceTest, StringEscapes) {
  EXPECT_EQ(
      R("{{ 'tab\\there' }}|{{ 'nl\\\\n' }}|{{ '\\x41\\u00e9\\101' }}|{{ 'unknown \\d escape' }}",
        nullptr),
      "tab\there|nl\\n|A\303\251A|unknown \\d escape");
}

TEST(JinjaReferenceTest, NestedLoop) {
  EXPECT_EQ(R("{% for a in [1, 2] %}{% for b in ['x', 'y'] %}{{ a }}{{ b }}{{ loop.index }}{% "
              "endfor %}{{ loop.index }};{% endfor %}",
              nullptr),
            "1x11y21;2x12y22;");
}

TEST(JinjaReferenceTest, PrintRepr) {
  EXPECT_EQ(R("{{ ['it\\'s', \"q\\\"\", 'a\\nb', '\303\251'] }} {{ {'k': none, 'b': true} }} {{ "
              "[1.5, -0.0, 1e16, 1e-5, 123456789.123] }}",
              nullptr),
            "[\"it's\", 'q\"', 'a\\nb', '\303\251'] {'k': None, 'b': True} [1.5, -0.0, 1e+16, "
            "1e-05, 123456789.123]");
}

TEST(JinjaReferenceTest, Strftime) {
  EXPECT_EQ(R("{{ strftime_now('%d %b %Y') }} {{ strftime_now('%Y-%m-%d %H:%M') }}", nullptr),
            "26 Jul 2026 2026-07-26 12:00");
}

TEST(JinjaReferenceTest, DictGlobal) {
  EXPECT_EQ(R("{{ dict(a=1, b='x') }} {{ namespace(a=1).a }}", nullptr), "{'a': 1, 'b': 'x'} 1");
}

TEST(JinjaReferenceTest, UndefinedOps) {
  EXPECT_EQ(
      R("{{ missing }}|{{ missing|length }}|{{ missing|list }}|{{ missing|join }}|{{ missing|trim "
        "}}|{{ missing|string }}|{{ 'a' in missing }}|{{ missing is iterable }}|{{ missing == none "
        "}}|{{ not missing }}|{{ missing|first }}|{{ (missing or 'x') }}",
        nullptr),
      "|0|[]||||False|True|False|True||x");
}

TEST(JinjaReferenceTest, Range) {
  EXPECT_EQ(R("{{ range(3)|list }} {{ range(1, 4)|list }} {{ range(10, 0, -3)|list }} {{ "
              "range(0)|list }}",
              nullptr),
            "[0, 1, 2] [1, 2, 3] [10, 7, 4, 1] []");
}

TEST(JinjaReferenceTest, LoopInMacroScope) {
  EXPECT_EQ(R("{% set top = 'T' %}{% macro m() %}{{ top }}{{ inner|default('-') }}{% endmacro %}{% "
              "for inner in [1] %}{{ m() }}{% endfor %}",
              nullptr),
            "T-");
}

TEST(JinjaReferenceTest, MessageLike) {
  EXPECT_EQ(R("{% for m in msgs %}{{ m.role }}:{{ m['content'] }}{% if m.tool_calls %}[{{ "
              "m.tool_calls|length }}]{% endif %}\n{% endfor %}",
              Vars("{\"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": "
                   "\"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"1\"}]}]}")),
            "user:hiassistant:None[1]");
}

// jinja2: UndefinedError: 'missing' is undefined
TEST(JinjaReferenceTest, ErrUndefinedAttr) {
  EXPECT_FALSE(RenderFixed("{{ missing.attr }}", nullptr).ok());
}

// jinja2: UndefinedError: 'missing' is undefined
TEST(JinjaReferenceTest, ErrUndefinedAdd) {
  EXPECT_FALSE(RenderFixed("{{ 'a' + missing }}", nullptr).ok());
}

// jinja2: TypeError: can only concatenate str (not "NoneType") to str
TEST(JinjaReferenceTest, ErrNoneAdd) {
  EXPECT_FALSE(
      RenderFixed(
          "{{ 'a' + n }}",
          Vars("{\"d\": {\"a\": 1, \"b\": [1, 2], \"c\": {\"x\": \"y\"}}, \"s\": \"  Hello World  "
               "\", \"n\": null, \"l\": [3, 1, 2], \"words\": [\"b\", \"A\", \"a\", \"C\"], "
               "\"users\": [{\"name\": \"Bob\", \"age\": 30, \"role\": \"user\"}, {\"name\": "
               "\"alice\", \"age\": 25, \"role\": \"admin\"}, {\"name\": \"Carl\", \"age\": 35, "
               "\"role\": \"user\"}], \"t\": true, \"f\": 1.5, \"i\": 7, \"e\": \"\", \"u8\": "
               "\"h\303\251llo w\303\266rld \342\234\223\"}"))
          .ok());
}

// jinja2: TypeError: '<' not supported between instances of 'int' and 'str'
TEST(JinjaReferenceTest, ErrTypeCompare) {
  EXPECT_FALSE(RenderFixed("{{ 1 < 'a' }}", nullptr).ok());
}

// jinja2: TemplateError: custom failure
TEST(JinjaReferenceTest, ErrRaise) {
  EXPECT_FALSE(RenderFixed("{{ raise_exception('custom failure') }}", nullptr).ok());
}

// jinja2: SecurityError: access to attribute 'append' of 'list' object is unsafe.
TEST(JinjaReferenceTest, ErrListAppend) {
  EXPECT_FALSE(
      RenderFixed(
          "{{ l.append(4) }}",
          Vars("{\"d\": {\"a\": 1, \"b\": [1, 2], \"c\": {\"x\": \"y\"}}, \"s\": \"  Hello World  "
               "\", \"n\": null, \"l\": [3, 1, 2], \"words\": [\"b\", \"A\", \"a\", \"C\"], "
               "\"users\": [{\"name\": \"Bob\", \"age\": 30, \"role\": \"user\"}, {\"name\": "
               "\"alice\", \"age\": 25, \"role\": \"admin\"}, {\"name\": \"Carl\", \"age\": 35, "
               "\"role\": \"user\"}], \"t\": true, \"f\": 1.5, \"i\": 7, \"e\": \"\", \"u8\": "
               "\"h\303\251llo w\303\266rld \342\234\223\"}"))
          .ok());
}

// jinja2: SecurityError: access to attribute 'update' of 'dict' object is unsafe.
TEST(JinjaReferenceTest, ErrDictUpdate) {
  EXPECT_FALSE(
      RenderFixed(
          "{{ d.update({'z': 1}) }}",
          Vars("{\"d\": {\"a\": 1, \"b\": [1, 2], \"c\": {\"x\": \"y\"}}, \"s\": \"  Hello World  "
               "\", \"n\": null, \"l\": [3, 1, 2], \"words\": [\"b\", \"A\", \"a\", \"C\"], "
               "\"users\": [{\"name\": \"Bob\", \"age\": 30, \"role\": \"user\"}, {\"name\": "
               "\"alice\", \"age\": 25, \"role\": \"admin\"}, {\"name\": \"Carl\", \"age\": 35, "
               "\"role\": \"user\"}], \"t\": true, \"f\": 1.5, \"i\": 7, \"e\": \"\", \"u8\": "
               "\"h\303\251llo w\303\266rld \342\234\223\"}"))
          .ok());
}

// jinja2: ZeroDivisionError: division by zero
TEST(JinjaReferenceTest, ErrDivZero) { EXPECT_FALSE(RenderFixed("{{ 1 / 0 }}", nullptr).ok()); }

// jinja2: UndefinedError: 'nothing' is undefined
TEST(JinjaReferenceTest, ErrCallUndefined) {
  EXPECT_FALSE(RenderFixed("{{ nothing() }}", nullptr).ok());
}

// jinja2: TypeError: object of type 'NoneType' has no len()
TEST(JinjaReferenceTest, ErrLengthNone) {
  EXPECT_FALSE(
      RenderFixed(
          "{{ n|length }}",
          Vars("{\"d\": {\"a\": 1, \"b\": [1, 2], \"c\": {\"x\": \"y\"}}, \"s\": \"  Hello World  "
               "\", \"n\": null, \"l\": [3, 1, 2], \"words\": [\"b\", \"A\", \"a\", \"C\"], "
               "\"users\": [{\"name\": \"Bob\", \"age\": 30, \"role\": \"user\"}, {\"name\": "
               "\"alice\", \"age\": 25, \"role\": \"admin\"}, {\"name\": \"Carl\", \"age\": 35, "
               "\"role\": \"user\"}], \"t\": true, \"f\": 1.5, \"i\": 7, \"e\": \"\", \"u8\": "
               "\"h\303\251llo w\303\266rld \342\234\223\"}"))
          .ok());
}

// jinja2: TypeError: cannot unpack non-iterable int object
TEST(JinjaReferenceTest, ErrUnpack) {
  EXPECT_FALSE(RenderFixed("{% for a, b in [1, 2] %}{% endfor %}", nullptr).ok());
}

// jinja2: TypeError: Object of type Undefined is not JSON serializable
TEST(JinjaReferenceTest, ErrTojsonUndefined) {
  EXPECT_FALSE(RenderFixed("{{ missing|tojson }}", nullptr).ok());
}

// jinja2: TypeError: '<' not supported between instances of 'str' and 'int'
TEST(JinjaReferenceTest, ErrSortMixed) {
  EXPECT_FALSE(RenderFixed("{{ [1, 'a']|sort }}", nullptr).ok());
}

// jinja2: TemplateRuntimeError: cannot assign attribute on non-namespace object
TEST(JinjaReferenceTest, ErrNsAssign) {
  EXPECT_FALSE(RenderFixed("{% set x = 1 %}{% set x.y = 2 %}", nullptr).ok());
}

// jinja2: TypeError: 'int' object is not iterable
TEST(JinjaReferenceTest, ErrIterateInt) {
  EXPECT_FALSE(RenderFixed("{% for x in 5 %}{% endfor %}", nullptr).ok());
}

TEST(JinjaReferenceTest, WsTabsLstrip) {
  EXPECT_EQ(R("a\n\t \t{% if true %}\n\tb\n\t{% endif %}\n", nullptr), "a\n\tb\n");
}

TEST(JinjaReferenceTest, WsSpacesAfterBlock) {
  EXPECT_EQ(R("{% if true %}   \nx{% endif %}", nullptr), "   \nx");
}

TEST(JinjaReferenceTest, WsMinusBlockEnd) {
  EXPECT_EQ(R("{% if true -%}\n\n   x\n{%- endif %}\n\ny", nullptr), "x\ny");
}

TEST(JinjaReferenceTest, WsUnicodeMinus) {
  EXPECT_EQ(R("a\343\200\200\302\240{%- if true %}x{% endif %}", nullptr), "ax");
}

TEST(JinjaReferenceTest, WsLstripAfterText) {
  EXPECT_EQ(R("text {% if true %}x{% endif %}", nullptr), "text x");
}

TEST(JinjaReferenceTest, WsLstripVarThenBlock) {
  EXPECT_EQ(R("{{ 'a' }}\n  {% if true %}b{% endif %}", nullptr), "a\nb");
}

TEST(JinjaReferenceTest, WsCommentTrim) {
  EXPECT_EQ(R("a{# c #}\nb\n  {#- x #}\nc", nullptr), "abc");
}

TEST(JinjaReferenceTest, WsRawLstrip) {
  EXPECT_EQ(R("x\n  {% raw %}\n  {{ y }}\n  {% endraw %}\nz", nullptr), "x\n\n  {{ y }}\nz");
}

TEST(JinjaReferenceTest, WsRawMinus) {
  EXPECT_EQ(R("x  {%- raw -%}  r  {%- endraw -%}  z", nullptr), "xrz");
}

TEST(JinjaReferenceTest, WsMacroBody) {
  EXPECT_EQ(R("{% macro m(x) %}\n  <{{ x }}>\n{% endmacro %}\n{{ m(1) }}{{ m(2) }}", nullptr),
            "  <1>\n  <2>\n");
}

TEST(JinjaReferenceTest, WsSetBlock) {
  EXPECT_EQ(R("{% set x %}\n  line\n{% endset %}\n[{{ x }}]", nullptr), "[  line\n]");
}

TEST(JinjaReferenceTest, WsOnlyTags) {
  EXPECT_EQ(
      R("{% if true %}\n{% endif %}\n{% for i in range(2) %}\n{{ i }}\n{% endfor %}\n", nullptr),
      "0\n1\n");
}

TEST(JinjaReferenceTest, WsFinalNewlines) { EXPECT_EQ(R("x\n\n", nullptr), "x\n"); }

TEST(JinjaReferenceTest, WsCrOnly) {
  EXPECT_EQ(R("a\rb{% if true %}\rc{% endif %}", nullptr), "a\nbc");
}

TEST(JinjaReferenceTest, DictAttrVsItem) {
  EXPECT_EQ(R("{{ d.items is callable }} {{ d['get'] is callable }} {{ {'items': 1}['items'] }} {{ "
              "{'items': 1}.items is callable }}",
              Vars("{\"d\": {\"a\": 1, \"b\": [1, 2], \"c\": {\"x\": \"y\"}}, \"s\": \"  Hello "
                   "World  \", \"n\": null, \"l\": [3, 1, 2], \"words\": [\"b\", \"A\", \"a\", "
                   "\"C\"], \"users\": [{\"name\": \"Bob\", \"age\": 30, \"role\": \"user\"}, "
                   "{\"name\": \"alice\", \"age\": 25, \"role\": \"admin\"}, {\"name\": \"Carl\", "
                   "\"age\": 35, \"role\": \"user\"}], \"t\": true, \"f\": 1.5, \"i\": 7, \"e\": "
                   "\"\", \"u8\": \"h\303\251llo w\303\266rld \342\234\223\"}")),
            "True True 1 True");
}

TEST(JinjaReferenceTest, CondChain) {
  EXPECT_EQ(R("{{ 'a' if false else 'b' if false else 'c' }}", nullptr), "c");
}

TEST(JinjaReferenceTest, FilterAfterCall) {
  EXPECT_EQ(R("{{ 'a b'.split()|join('+') }} {{ range(3)|list|length }} {{ (l|sort)[0] }}",
              Vars("{\"d\": {\"a\": 1, \"b\": [1, 2], \"c\": {\"x\": \"y\"}}, \"s\": \"  Hello "
                   "World  \", \"n\": null, \"l\": [3, 1, 2], \"words\": [\"b\", \"A\", \"a\", "
                   "\"C\"], \"users\": [{\"name\": \"Bob\", \"age\": 30, \"role\": \"user\"}, "
                   "{\"name\": \"alice\", \"age\": 25, \"role\": \"admin\"}, {\"name\": \"Carl\", "
                   "\"age\": 35, \"role\": \"user\"}], \"t\": true, \"f\": 1.5, \"i\": 7, \"e\": "
                   "\"\", \"u8\": \"h\303\251llo w\303\266rld \342\234\223\"}")),
            "a+b 3 1");
}

TEST(JinjaReferenceTest, NegFilter) {
  EXPECT_EQ(R("{{ -1|abs }} {{ -l|length if false else 'x' }}",
              Vars("{\"d\": {\"a\": 1, \"b\": [1, 2], \"c\": {\"x\": \"y\"}}, \"s\": \"  Hello "
                   "World  \", \"n\": null, \"l\": [3, 1, 2], \"words\": [\"b\", \"A\", \"a\", "
                   "\"C\"], \"users\": [{\"name\": \"Bob\", \"age\": 30, \"role\": \"user\"}, "
                   "{\"name\": \"alice\", \"age\": 25, \"role\": \"admin\"}, {\"name\": \"Carl\", "
                   "\"age\": 35, \"role\": \"user\"}], \"t\": true, \"f\": 1.5, \"i\": 7, \"e\": "
                   "\"\", \"u8\": \"h\303\251llo w\303\266rld \342\234\223\"}")),
            "1 x");
}

TEST(JinjaReferenceTest, LoopCycleNested) {
  EXPECT_EQ(R("{% for r in [1, 2, 3] %}{{ loop.cycle('odd', 'even') }} {% endfor %}", nullptr),
            "odd even odd ");
}

TEST(JinjaReferenceTest, InTupleTest) {
  EXPECT_EQ(R("{{ 'b' in ('a', 'b') }} {{ 'x' not in ['a'] }}", nullptr), "True True");
}

TEST(JinjaReferenceTest, StrJoinNumbersFilter) {
  EXPECT_EQ(R("{{ [1, 2]|join('-') }} {{ ['a', none]|join }}", nullptr), "1-2 aNone");
}

TEST(JinjaReferenceTest, TojsonIndent4Nested) {
  EXPECT_EQ(R("{{ {'a': [1, {'b': none}], 'c': '\303\251'}|tojson(indent=4) }}", nullptr),
            "{\n    \"a\": [\n        1,\n        {\n            \"b\": null\n        }\n    ],\n  "
            "  \"c\": \"\303\251\"\n}");
}

TEST(JinjaReferenceTest, NumbersPrint) {
  EXPECT_EQ(
      R("{{ 1/3 }} {{ 2/3 }} {{ 1e100 }} {{ 123456789012345678 }} {{ 0.1 * 3 }} {{ 5e-324 }} {{ "
        "1.7976931348623157e308 }} {{ 100.0 }} {{ 1e15 }} {{ 1e16 }} {{ 0.0001 }} {{ 0.00001 }}",
        nullptr),
      "0.3333333333333333 0.6666666666666666 1e+100 123456789012345678 0.30000000000000004 5e-324 "
      "1.7976931348623157e+308 100.0 1000000000000000.0 1e+16 0.0001 1e-05");
}

TEST(JinjaReferenceTest, UnicodeCase) {
  EXPECT_EQ(
      R("{{ "
        "'\303\211\303\251\303\237\303\200\303\240\303\277\305\270\304\200\304\201\305\201\305\202"
        "\316\243\317\203\316\206\316\254\320\226\320\266\320\201\321\221\324\261\325\241\357\274"
        "\241\357\275\201\304\261'|upper }}|{{ "
        "'\303\211\303\251\303\200\303\240\305\270\304\200\304\201\305\201\305\202\316\243\317\203"
        "\317\202\316\206\316\254\320\226\320\266\320\201\321\221\324\261\325\241\357\274\241\357"
        "\275\201'|lower }}|{{ '\303\251lan vital \303\237a'|title }}|{{ '\303\251lan "
        "\303\237a'.title() }}|{{ '\303\211LAN'|capitalize }}|{{ '\303\277'.upper() }}",
        nullptr),
      "\303\211\303\211SS\303\200\303\200\305\270\305\270\304\200\304\200\305\201\305\201\316\243"
      "\316\243\316\206\316\206\320\226\320\226\320\201\320\201\324\261\324\261\357\274\241\357\274"
      "\241I|"
      "\303\251\303\251\303\240\303\240\303\277\304\201\304\201\305\202\305\202\317\203\317\203\317"
      "\202\316\254\316\254\320\266\320\266\321\221\321\221\325\241\325\241\357\275\201\357\275\201"
      "|\303\211lan Vital SSa|\303\211lan Ssa|\303\211lan|\305\270");
}

TEST(JinjaReferenceTest, SafeStringifies) {
  EXPECT_EQ(R("{% for c in (1, 'x')|safe %}[{{ c }}]{% endfor %}", nullptr),
            "[(][1][,][ ]['][x]['][)]");
}

TEST(JinjaReferenceTest, TruncateListUnchanged) {
  EXPECT_EQ(R("{{ [1, 2, 3]|truncate(5) }}", nullptr), "[1, 2, 3]");
}

TEST(JinjaReferenceTest, UndefinedIsCallable) {
  EXPECT_EQ(R("{{ missing is callable }}", nullptr), "True");
}

TEST(JinjaReferenceTest, PercentListUnused) {
  EXPECT_EQ(R("{{ 'abc' % [1, 2] }}|{{ 'a%sb' % [1] }}", nullptr), "abc|a[1]b");
}

TEST(JinjaReferenceTest, MapFalsyInput) {
  EXPECT_EQ(
      R("{{ none|map('string')|list }}{{ 0|select|list }}{{ ''|selectattr('x')|list }}", nullptr),
      "[][][]");
}

// jinja2: TypeError: unsupported operand type(s) for +=: 'NoneType' and 'str'
TEST(JinjaReferenceTest, ErrIndentNone) {
  EXPECT_FALSE(RenderFixed("{{ none|indent }}", nullptr).ok());
}

// jinja2: TypeError: object of type 'int' has no len()
TEST(JinjaReferenceTest, ErrTruncateInt) {
  EXPECT_FALSE(RenderFixed("{{ 1|truncate(5) }}", nullptr).ok());
}

// jinja2: UndefinedError: 'missing' is undefined
TEST(JinjaReferenceTest, ErrUndefinedInt) {
  EXPECT_FALSE(RenderFixed("{{ missing|int }}", nullptr).ok());
}

// jinja2: UndefinedError: 'missing' is undefined
TEST(JinjaReferenceTest, ErrUndefinedFloat) {
  EXPECT_FALSE(RenderFixed("{{ missing|float }}", nullptr).ok());
}

TEST(JinjaReferenceTest, GeneratorsTruthyAndConsumed) {
  EXPECT_EQ(R("{% if [0]|select %}gen-truthy{% endif %}|{{ [1, 2]|map('string')|join }}|{{ [3, "
              "1]|reverse|list }}|{{ ([]|select|list)|length }}",
              nullptr),
            "gen-truthy|12|[1, 3]|0");
}

// jinja2: TypeError: object of type 'generator' has no len()
TEST(JinjaReferenceTest, ErrGeneratorLength) {
  EXPECT_FALSE(RenderFixed("{{ [1]|select|length }}", nullptr).ok());
}
}  // namespace
}  // namespace ringlm::jinja
