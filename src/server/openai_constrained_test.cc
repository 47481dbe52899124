// response_format / guided_regex / guided_json parsing (openai_codec.h): what reaches the
// generator, and the 400s for bad schemas and patterns.
#include <gtest/gtest.h>

#include "constrained/regex.h"
#include "server/openai_codec.h"

namespace inferd::server {
namespace {

std::string Chat(const std::string& extra) {
  return R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], )" + extra + "}";
}

GenerationCall ParseOk(const std::string& body) {
  GenerationCall call;
  auto err = ParseGenerationCall(GenApi::kChatCompletions, body, &call);
  EXPECT_FALSE(err.has_value()) << body << ": " << (err ? err->message : "");
  return call;
}

TEST(OpenAiConstrainedTest, FormatsBecomeARegexTheOutputMustMatch) {
  EXPECT_FALSE(ParseOk(Chat(R"("response_format": {"type": "text"})")).params.guided_regex);
  EXPECT_FALSE(ParseOk(Chat(R"("temperature": 0)")).params.guided_regex);

  auto object = ParseOk(Chat(R"("response_format": {"type": "json_object"})")).params.guided_regex;
  ASSERT_TRUE(object);
  auto dfa = constrained::Dfa::FromRegex(*object);
  ASSERT_TRUE(dfa.ok());
  EXPECT_TRUE(dfa->Matches(R"({"a":[1,{"b":null}]})"));
  EXPECT_FALSE(dfa->Matches("[1]"));

  auto schema = ParseOk(Chat(R"("response_format": {"type": "json_schema", "json_schema": {
      "name": "person", "strict": true, "schema": {"type": "object",
      "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
      "required": ["name", "age"], "additionalProperties": false}}})"))
                    .params.guided_regex;
  ASSERT_TRUE(schema);
  dfa = constrained::Dfa::FromRegex(*schema);
  ASSERT_TRUE(dfa.ok());
  EXPECT_TRUE(dfa->Matches(R"({"name":"Emma","age":21})"));
  EXPECT_FALSE(dfa->Matches(R"({"name":"Emma"})"));

  EXPECT_EQ(*ParseOk(Chat(R"j("guided_regex": "(yes|no)")j")).params.guided_regex, "(yes|no)");
  EXPECT_EQ(*ParseOk(Chat(R"("response_format": {"type": "regex", "regex": "[0-9]+"})"))
                 .params.guided_regex,
            "[0-9]+");
  auto guided = ParseOk(Chat(R"("guided_json": {"type": "boolean"})")).params.guided_regex;
  ASSERT_TRUE(guided);
  EXPECT_TRUE(constrained::Dfa::FromRegex(*guided)->Matches("true"));
  auto text = ParseOk(Chat(R"("guided_json": "{\"const\": 3}")")).params.guided_regex;
  ASSERT_TRUE(text);
  EXPECT_TRUE(constrained::Dfa::FromRegex(*text)->Matches("3"));
  // Completions take it too.
  GenerationCall c;
  ASSERT_FALSE(ParseGenerationCall(GenApi::kCompletions,
                                   R"({"model": "m", "prompt": "x", "guided_regex": "a+"})", &c));
  EXPECT_EQ(*c.params.guided_regex, "a+");
}

TEST(OpenAiConstrainedTest, BadSchemasAndPatternsAre400sNamingTheField) {
  struct Case {
    std::string extra, param, message;
  };
  const std::vector<Case> cases = {
      {R"("response_format": "json")", "response_format", "must be an object with a 'type'"},
      {R"("response_format": {"type": "yaml"})", "response_format", "got 'yaml'"},
      {R"("response_format": {"type": "json_schema"})", "response_format",
       "'response_format.json_schema' is required"},
      {R"("response_format": {"type": "json_schema", "json_schema": {"name": "x"}})",
       "response_format",
       "'response_format.json_schema.schema' (a JSON schema object) is required"},
      {R"("response_format": {"type": "json_schema", "json_schema": {"name": 3, "schema": {}}})",
       "response_format", "'response_format.json_schema.name'"},
      {R"("response_format": {"type": "json_schema", "json_schema": {"schema": {}, "strict": 1}})",
       "response_format", "strict"},
      {R"("response_format": {"type": "json_schema", "json_schema": {"name": "x",
          "schema": {"type": "integer", "minimum": 3}}})",
       "response_format", "unsupported JSON schema keyword 'minimum' at '/'"},
      {R"("response_format": {"type": "json_schema", "json_schema": {"name": "x",
          "schema": {"type": "object", "properties": {"d": {"type": "date"}}}}})",
       "response_format", "'type' at '/properties/d' must be one of"},
      {R"("response_format": {"type": "json_schema", "json_schema": {"name": "x",
          "schema": {"type": "string", "pattern": "([a-z]"}}})",
       "response_format", "invalid regex: missing ')'"},
      {R"("response_format": {"type": "regex"})", "response_format", "'response_format.regex'"},
      {R"("response_format": {"type": "regex", "regex": "a{3,1}"})", "response_format",
       "invalid regex"},
      {R"("guided_regex": "(?<=x)y")", "guided_regex", "lookaround"},
      {R"("guided_regex": "[a-")", "guided_regex", "missing ']'"},
      {R"("guided_regex": 5)", "guided_regex", "must be a string"},
      {R"("guided_json": {"oneOf": []})", "guided_json", "unsupported JSON schema keyword 'oneOf'"},
      {R"("guided_json": "{not json")", "guided_json", "not a valid JSON schema"},
      {R"("guided_regex": "a", "response_format": {"type": "json_object"})", "guided_regex",
       "at most one of"},
  };
  for (const Case& c : cases) {
    GenerationCall call;
    auto err = ParseGenerationCall(GenApi::kChatCompletions, Chat(c.extra), &call);
    ASSERT_TRUE(err.has_value()) << c.extra;
    EXPECT_EQ(err->http_status, 400);
    EXPECT_EQ(err->param, c.param) << c.extra;
    EXPECT_NE(err->message.find(c.message), std::string::npos) << c.extra << ": " << err->message;
    EXPECT_EQ(err->type, "invalid_request_error");
  }
}

}  // namespace
}  // namespace inferd::server
