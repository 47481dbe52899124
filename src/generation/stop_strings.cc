#include "generation/stop_strings.h"

#include <algorithm>

namespace inferd::gen {

bool StopStringFilter::Push(std::string_view text, std::string* out) {
  out->clear();
  if (stop_.empty()) {
    out->assign(text);
    return false;
  }
  held_.append(text);
  // The earliest stop string wins. A match cannot start in text emitted earlier: that text was
  // held back exactly while it could still begin one.
  size_t first = std::string::npos;
  for (const std::string& s : stop_) {
    if (!s.empty()) first = std::min(first, held_.find(s));
  }
  if (first != std::string::npos) {
    out->assign(held_, 0, first);
    held_.clear();
    return true;
  }
  size_t keep = 0;  // longest suffix of held_ that is a proper prefix of some stop string
  for (const std::string& s : stop_) {
    if (s.empty()) continue;
    for (size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n) {
      if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
    }
  }
  out->assign(held_, 0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return false;
}

std::string StopStringFilter::Flush() {
  std::string rest;
  rest.swap(held_);
  return rest;
}

}  // namespace inferd::gen
