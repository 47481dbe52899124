// JSON Schema -> regular expression (regex.h) for constrained output: the regex matches exactly
// the compact JSON texts (no whitespace outside strings) that the generator may produce, every
// one of which validates against the schema.
//
// Supported subset (anything else is INVALID_ARGUMENT naming the keyword and its JSON pointer, so
// a client learns at request time that a constraint would not be enforced):
//   type: "object" | "array" | "string" | "integer" | "number" | "boolean" | "null", or an array
//         of them (any of the types);
//   object: properties (generated in their declared order), required (the others are optional),
//           additionalProperties (never generated, so any value is accepted); an object schema
//           without properties is any object (see below), with additionalProperties false {};
//   array: items (a schema; absent: any value), minItems, maxItems;
//   string: minLength, maxLength (characters), pattern (anchored: the whole string matches; it
//           applies to the string's JSON text between the quotes and must not be able to match a
//           quote, a backslash or a control character);
//   enum, const (any JSON values; written compactly as RapidJSON writes them), anyOf;
//   annotations are ignored: title, description, default, examples, $schema, $id, $comment,
//   deprecated, readOnly, writeOnly. An empty schema {} (or true) is any value.
// Not supported: $ref/$defs, allOf/oneOf/not, if/then/else, numeric bounds (minimum, maximum,
// multipleOf), format, patternProperties, prefixItems/tuple items, uniqueItems, contains,
// dependent*/unevaluated*.
// Bounds that keep generation finite: integers have at most 16 digits, fractions at most 15,
// exponents at most 3; "any value" nests at most `max_depth` arrays/objects deep.
#pragma once

#include <rapidjson/document.h>

#include <string>
#include <string_view>

#include "common/status.h"

namespace inferd::constrained {

struct JsonRegexOptions {
  int max_depth = 3;          // nesting of "any value" (json_object, {} and untyped items)
  int max_schema_depth = 32;  // nesting of the schema itself
};

// `schema` is a JSON Schema (an object or a boolean).
StatusOr<std::string> JsonSchemaToRegex(const rapidjson::Value& schema,
                                        const JsonRegexOptions& options = {});
// The same from the schema's JSON text.
StatusOr<std::string> JsonSchemaTextToRegex(std::string_view schema_json,
                                            const JsonRegexOptions& options = {});
// Any JSON object (OpenAI's response_format json_object), nesting at most options.max_depth.
std::string JsonObjectRegex(const JsonRegexOptions& options = {});

}  // namespace inferd::constrained
