#include "constrained/json_schema.h"

#include <gtest/gtest.h>

#include "constrained/regex.h"

namespace inferd::constrained {
namespace {

Dfa SchemaDfa(std::string_view schema) {
  auto regex = JsonSchemaTextToRegex(schema);
  EXPECT_TRUE(regex.ok()) << schema << ": " << regex.status().ToString();
  auto dfa = Dfa::FromRegex(*regex);
  EXPECT_TRUE(dfa.ok()) << *regex << ": " << dfa.status().ToString();
  return std::move(*dfa);
}

struct Case {
  const char* schema;
  std::vector<const char*> yes, no;
};

void Check(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    Dfa dfa = SchemaDfa(c.schema);
    for (const char* s : c.yes) EXPECT_TRUE(dfa.Matches(s)) << c.schema << " should accept " << s;
    for (const char* s : c.no) EXPECT_FALSE(dfa.Matches(s)) << c.schema << " should reject " << s;
  }
}

TEST(JsonSchemaTest, Scalars) {
  Check({
      {R"({"type":"integer"})", {"0", "-12", "1234567890123456"}, {"01", "1.5", "+1", "", "-"}},
      {R"({"type":"number"})", {"0", "-1.25", "3e10", "2.5E-3"}, {".5", "1.", "1e", "--1"}},
      {R"({"type":"boolean"})", {"true", "false"}, {"True", "1"}},
      {R"({"type":"null"})", {"null"}, {"nul", "None"}},
      {R"({"type":"string"})",
       {R"("")", R"("a b")", R"("q\"\\\n\u00e9")", "\"\xc3\xa9\""},
       {R"("a)", R"("a"b")", "\"\x01\"", R"("\x")"}},
      {R"({"type":"string","minLength":2,"maxLength":3})",
       {R"("ab")", R"("a\nb")", "\"\xc3\xa9\xc3\xa9\""},
       {R"("a")", R"("abcd")"}},
      {R"({"type":"string","pattern":"^[a-z]+-[0-9]{2}$"})",
       {R"("ab-12")"},
       {R"("ab-1")", R"("Ab-12")"}},
      {R"({"type":["string","null"]})", {R"("x")", "null"}, {"1"}},
      {R"({"enum":["red","green",3,null,{"a":[1]}]})",
       {R"("red")", "3", "null", R"({"a":[1]})"},
       {R"("blue")", R"({"a":[2]})"}},
      {R"({"const":"fixed"})", {R"("fixed")"}, {R"("other")"}},
      {R"({"anyOf":[{"type":"integer"},{"type":"boolean"}]})", {"1", "true"}, {R"("1")"}},
  });
}

TEST(JsonSchemaTest, ObjectsWithRequiredAndOptionalProperties) {
  Check({
      {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},
           "required":["a","b"]})",
       {R"({"a":1,"b":"x"})"},
       {R"({"b":"x","a":1})", R"({"a":1})", R"({"a":1,"b":"x",})", "{}"}},
      {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},
           "c":{"type":"integer"}},"required":["b"]})",
       {R"({"b":2})", R"({"a":1,"b":2})", R"({"b":2,"c":3})", R"({"a":1,"b":2,"c":3})"},
       {"{}", R"({"a":1})", R"({"a":1,"c":3})", R"({,"b":2})", R"({"b":2,})"}},
      {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}}})",
       {"{}", R"({"a":1})", R"({"b":2})", R"({"a":1,"b":2})"},
       {R"({"a":1,})", R"({,"b":2})"}},
      {R"({"type":"object","additionalProperties":false})", {"{}"}, {R"({"a":1})"}},
      {R"({"type":"object"})", {"{}", R"({"x":[1,{"y":null}],"z":"w"})"}, {"[]", "{"}},
      {R"({"type":"object","required":["id"]})", {R"({"id":[1,2]})"}, {"{}"}},
      {R"({"type":"object","properties":{"p":{"type":"object","properties":{"q":{"type":"array",
           "items":{"type":"boolean"}}},"required":["q"]}},"required":["p"]})",
       {R"({"p":{"q":[]}})", R"({"p":{"q":[true,false]}})"},
       {R"({"p":{"q":[1]}})", R"({"p":{}})"}},
  });
}

TEST(JsonSchemaTest, ArraysWithBounds) {
  Check({
      {R"({"type":"array","items":{"type":"integer"}})",
       {"[]", "[1]", "[1,2,3]"},
       {"[1,]", "[,1]", "["}},
      {R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3})",
       {"[1,2]", "[1,2,3]"},
       {"[]", "[1]", "[1,2,3,4]"}},
      {R"({"type":"array","items":{"type":"integer"},"minItems":1})",
       {"[1]", "[1,2,3,4,5]"},
       {"[]"}},
      {R"({"type":"array","items":{"type":"integer"},"maxItems":0})", {"[]"}, {"[1]"}},
      {R"({"type":"array"})", {"[]", R"([1,"a",{"b":[]}])"}, {"[1,]"}},
  });
}

TEST(JsonSchemaTest, AnyValueAndJsonObjectNestAtMostMaxDepth) {
  JsonRegexOptions o;
  o.max_depth = 2;
  auto dfa = Dfa::FromRegex(JsonObjectRegex(o));
  ASSERT_TRUE(dfa.ok()) << dfa.status().ToString();
  EXPECT_TRUE(dfa->Matches(R"({"a":{"b":1},"c":[1,"x"]})"));
  EXPECT_TRUE(dfa->Matches("{}"));
  EXPECT_FALSE(dfa->Matches(R"({"a":{"b":{"c":1}}})"));  // three deep
  EXPECT_FALSE(dfa->Matches("[]"));                      // not an object
  EXPECT_FALSE(dfa->Matches(R"({"a":1} )"));             // no whitespace
  auto any = JsonSchemaTextToRegex("{}");
  ASSERT_TRUE(any.ok());
  auto any_dfa = Dfa::FromRegex(*any);
  ASSERT_TRUE(any_dfa.ok());
  for (const char* v : {"1", "\"s\"", "null", "[1,[2]]", "{\"k\":true}"}) {
    EXPECT_TRUE(any_dfa->Matches(v)) << v;
  }
}

TEST(JsonSchemaTest, DefaultJsonObjectCompilesToAModestAutomaton) {
  auto dfa = Dfa::FromRegex(JsonObjectRegex());
  ASSERT_TRUE(dfa.ok()) << dfa.status().ToString();
  EXPECT_LT(dfa->num_states(), 6000);  // 4,062 states at depth 3 (bounded digits x nesting)
}

TEST(JsonSchemaTest, UnsupportedOrInvalidSchemasAreClearErrors) {
  struct Bad {
    const char* schema;
    const char* message;
  };
  const std::vector<Bad> cases = {
      {"{", "not valid JSON"},
      {"[1]", "must be an object or a boolean"},
      {"false", "no value matches"},
      {R"({"type":"integer","minimum":0})", "unsupported JSON schema keyword 'minimum' at '/'"},
      {R"({"type":"object","properties":{"d":{"type":"string","format":"date"}}})",
       "unsupported JSON schema keyword 'format' at '/properties/d'"},
      {R"({"$ref":"#/$defs/x"})", "unsupported JSON schema keyword '$ref'"},
      {R"({"oneOf":[{"type":"integer"}]})", "'oneOf'"},
      {R"({"type":"decimal"})", "'type' at '/' must be one of"},
      {R"({"type":[]})", "empty array"},
      {R"({"enum":[]})", "non-empty array"},
      {R"({"type":"string","minLength":-1})", "'minLength' at '/' must be an integer"},
      {R"({"type":"string","minLength":3,"maxLength":2})", "below 'minLength'"},
      {R"({"type":"string","pattern":"(a"})", "'pattern' at '/': invalid regex: missing ')'"},
      {R"({"type":"string","pattern":".*"})", "can match a quote"},
      {R"({"type":"array","items":[{"type":"integer"}]})", "tuple 'items'"},
      {R"({"type":"array","maxItems":1000})", "'maxItems' at '/' must be an integer in [0, 100]"},
      {R"({"type":"object","properties":[]})", "'properties' at '/' must be an object"},
      {R"({"type":"object","required":"a"})", "'required' at '/' must be an array"},
      {R"({"minLength":1,"items":{}})", "several types"},
  };
  for (const Bad& c : cases) {
    auto r = JsonSchemaTextToRegex(c.schema);
    ASSERT_FALSE(r.ok()) << c.schema;
    EXPECT_NE(r.status().message().find(c.message), std::string::npos)
        << c.schema << ": " << r.status().message();
  }
}

TEST(JsonSchemaTest, DeepSchemasFailInsteadOfRecursingForever) {
  std::string schema;
  for (int i = 0; i < 40; ++i) schema += R"({"type":"array","items":)";
  schema += R"({"type":"integer"})";
  for (int i = 0; i < 40; ++i) schema += "}";
  auto r = JsonSchemaTextToRegex(schema);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nests deeper than 32"), std::string::npos);
}

TEST(JsonSchemaTest, AnnotationsAreIgnored) {
  Check({{R"({"title":"T","description":"d","$schema":"x","default":1,"examples":[1],
              "x-extra":true,"type":"integer"})",
          {"7"},
          {"\"7\""}}});
}

}  // namespace
}  // namespace inferd::constrained
