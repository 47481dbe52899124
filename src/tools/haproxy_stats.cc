#include "tools/haproxy_stats.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <charconv>

namespace inferd::tools {
namespace {

// A blocking Unix-socket exchange with a deadline. Hand-written on POSIX sockets rather than
// Boost.Asio: one short request and an answer read to EOF, polled against a deadline, is all the
// HAProxy CLI needs, and it keeps the controller free of an io_context and its threads.
class UnixFd {
 public:
  UnixFd() : fd_(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) {}
  ~UnixFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  UnixFd(const UnixFd&) = delete;
  UnixFd& operator=(const UnixFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Waits until `fd` is ready for `events` or the deadline passes.
bool WaitFd(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return false;
  }
}

// Splits one CSV line; HAProxy quotes a field holding a comma or a quote ("" inside quotes).
std::vector<std::string> SplitCsv(std::string_view line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

StatusOr<int64_t> Counter(const std::string& text, std::string_view column) {
  int64_t v = 0;
  if (text.empty()) return int64_t{0};  // HAProxy leaves a counter empty where it has none
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size()) {
    return InvalidArgument("show stat: {} '{}' is not a number", column, text);
  }
  return v;
}

}  // namespace

StatusOr<std::string> HaproxyCommand(const std::string& path, const std::string& commands,
                                     std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return InvalidArgument("bad HAProxy stats socket path '{}'", path);
  }
  memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  UnixFd fd;
  if (fd.get() < 0) return Unavailable("socket(): {}", strerror(errno));
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Unavailable("cannot connect to HAProxy's stats socket '{}': {}", path, strerror(errno));
  }
  const std::string line = commands + "\n";
  for (size_t sent = 0; sent < line.size();) {
    if (!WaitFd(fd.get(), POLLOUT, deadline)) {
      return DeadlineExceeded("HAProxy's stats socket '{}' did not take the command", path);
    }
    const ssize_t n = ::send(fd.get(), line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EINTR) return Unavailable("writing to '{}': {}", path, strerror(errno));
    if (n > 0) sent += static_cast<size_t>(n);
  }
  std::string answer;
  char buf[16384];
  for (;;) {
    if (!WaitFd(fd.get(), POLLIN, deadline)) {
      return DeadlineExceeded("HAProxy's stats socket '{}' did not answer in {} ms", path,
                              timeout.count());
    }
    const ssize_t n = ::recv(fd.get(), buf, sizeof(buf), 0);
    if (n == 0) break;
    if (n < 0 && errno != EINTR) return Unavailable("reading '{}': {}", path, strerror(errno));
    if (n > 0) answer.append(buf, static_cast<size_t>(n));
  }
  return answer;
}

std::string ShowStatCommand() { return "show stat -1 4 -1"; }

bool UsableServerStatus(std::string_view status) {
  return status == "UP" || status.starts_with("UP ") || status == "no check";
}

StatusOr<std::map<std::string, std::vector<ServerSample>>> ParseShowStat(std::string_view csv) {
  std::map<std::string, std::vector<ServerSample>> out;
  std::map<std::string, size_t> col;  // the current header's columns
  size_t start = 0;
  while (start < csv.size()) {
    size_t end = csv.find('\n', start);
    if (end == std::string_view::npos) end = csv.size();
    std::string_view line = csv.substr(start, end - start);
    start = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    if (line.starts_with("# ")) {
      col.clear();
      std::vector<std::string> names = SplitCsv(line.substr(2));
      for (size_t i = 0; i < names.size(); ++i) col[names[i]] = i;
      for (const char* need : {"pxname", "svname", "status", "scur", "stot"}) {
        if (!col.count(need)) return InvalidArgument("show stat: no '{}' column", need);
      }
      continue;
    }
    if (col.empty()) {
      return InvalidArgument("show stat: a row before the header: '{}'",
                             std::string(line.substr(0, 80)));
    }
    std::vector<std::string> f = SplitCsv(line);
    if (f.size() < col.size() - 1) {  // the header ends with a ',' (an empty last name)
      return InvalidArgument("show stat: a row with {} fields under a header of {}", f.size(),
                             col.size());
    }
    const std::string& sv = f[col["svname"]];
    if (sv == "FRONTEND" || sv == "BACKEND") continue;
    if (col.count("bck") && f[col["bck"]] == "1") continue;  // a standby: not balanced
    ServerSample s;
    s.name = sv;
    s.usable = UsableServerStatus(f[col["status"]]);
    ASSIGN_OR_RETURN(s.total, Counter(f[col["stot"]], "stot"));
    ASSIGN_OR_RETURN(s.in_flight, Counter(f[col["scur"]], "scur"));
    out[f[col["pxname"]]].push_back(std::move(s));
  }
  return out;
}

std::string ActionCommands(const std::string& backend, const BalancerAction& action) {
  const std::string server = backend + "/" + action.server;
  switch (action.kind) {
    case BalancerAction::kShed:
      return "disable agent " + server + "; set server " + server + " state drain";
    case BalancerAction::kProbe:
      return "set weight " + server + " 1; set server " + server + " state ready";
    case BalancerAction::kRestore:
      break;
  }
  return "set weight " + server + " 100%; set server " + server + " state ready; enable agent " +
         server;
}

}  // namespace inferd::tools
