#include "server/json_text.h"

#include <algorithm>
#include <cctype>

namespace inferd::server {
std::string RedactRepositoryPath(std::string_view message, const std::vector<std::string>& roots) {
  // Only absolute spellings are secret (a relative one tells nothing of the host); longest
  // first, so "/a/repo" is not cut out of "/a/repo/../repo" spellings first.
  std::vector<std::string> sorted;
  for (const auto& r : roots) {
    std::string root = r;
    while (root.size() > 1 && root.back() == '/') root.pop_back();
    if (root.size() > 1 && root[0] == '/') sorted.push_back(root);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  std::string out(message);
  for (const auto& root : sorted) {
    std::string next;
    size_t pos = 0;
    for (size_t hit; (hit = out.find(root, pos)) != std::string::npos;) {
      const size_t end = hit + root.size();
      const char after = end < out.size() ? out[end] : '\0';
      const bool boundary = !(std::isalnum(static_cast<unsigned char>(after)) || after == '-' ||
                              after == '_' || after == '.');
      next.append(out, pos, hit - pos);
      if (after == '/') {
        pos = end + 1;  // "<root>/m/1" -> "m/1"
      } else if (boundary) {
        next.append("<model repository>");
        pos = end;
      } else {
        next.append(root);  // "<root>-other": a different path
        pos = end;
      }
    }
    next.append(out, pos, std::string::npos);
    out = std::move(next);
  }
  return out;
}

}  // namespace inferd::server
