// ChatTemplate: turns chat messages into one prompt string, from a small JSON file in the model
// folder (`chat_template.json`).
//
// Why not Hugging Face's Jinja templates: a Jinja subset worth the name (loops, conditions,
// filters, whitespace control) is a parser and an interpreter to maintain, and a crash or
// injection surface fed by every request; the templates of small chat models reduce to a prefix
// and a suffix per role plus the text that cues the assistant's turn, which this format states
// directly and RapidJSON (already a dependency) parses. The format:
//
//   {
//     "roles": {                                    // every role a request may use
//       "system":    {"prefix": "",            "suffix": "\n\n"},
//       "user":      {"prefix": "User: ",      "suffix": "\n"},
//       "assistant": {"prefix": "Assistant: ", "suffix": "\n"}
//     },
//     "generation_prompt": "Assistant:",            // appended after the last message
//     "stop": ["\nUser:"]                           // stop strings added to every chat request
//   }
//
// The prompt is, for each message in order, prefix + content + suffix of its role, then
// generation_prompt. BOS is not part of the template: the tokenizer adds it.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "server/openai_codec.h"

namespace inferd::server {

class ChatTemplate {
 public:
  // The template used when a model folder has no chat_template.json (the format's example).
  static ChatTemplate Default();
  // INVALID_ARGUMENT naming the problem for malformed JSON or wrong field types.
  static StatusOr<ChatTemplate> Parse(std::string_view json);

  // INVALID_ARGUMENT for a role the template does not define.
  StatusOr<std::string> Render(const std::vector<ChatMessage>& messages) const;
  const std::vector<std::string>& stop() const { return stop_; }

 private:
  struct Role {
    std::string prefix, suffix;
  };
  std::map<std::string, Role, std::less<>> roles_;
  std::string generation_prompt_;
  std::vector<std::string> stop_;
};

}  // namespace inferd::server
