// StopStringFilter: cuts a sequence's streamed text at the first stop string, and holds back text
// that might still become one, so a client never sees part of a stop string.
//
//   StopStringFilter f({"\n\n", "END"});
//   std::string out;
//   bool stopped = f.Push(" the E", &out);   // out == " the ": "E" may start "END"
//   stopped = f.Push("ND is", &out);          // true; out == "": the text ends before "END"
//   out = f.Flush();                          // at the end of the sequence: what is held back
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace inferd::gen {

class StopStringFilter {
 public:
  explicit StopStringFilter(std::vector<std::string> stop) : stop_(std::move(stop)) {}

  // Appends `text` to the stream; `*out` gets the text that is now safe to emit. Returns true
  // when a stop string was found: `*out` then ends right before it and the stream is over.
  bool Push(std::string_view text, std::string* out);
  // The held-back text (call when the sequence ends for another reason).
  std::string Flush();

 private:
  std::vector<std::string> stop_;
  std::string held_;  // the longest suffix of the stream that is a proper prefix of a stop string
};

}  // namespace inferd::gen
