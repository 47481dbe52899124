// HAProxy's runtime API as `inferd fleet balance` uses it (docs/fleet.md, "A slow node: the
// fleet balancer"): one request/answer exchange on the stats socket, `show stat` parsed into
// per-server samples, and the commands that shed or return a server.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "tools/fleet_balancer.h"

namespace inferd::tools {

// Sends `commands` (one line; several commands separated by ';') to HAProxy's CLI on the Unix
// socket `path` and returns everything it answers before closing. Unavailable when the socket
// cannot be reached, DeadlineExceeded after `timeout` without an answer.
StatusOr<std::string> HaproxyCommand(const std::string& path, const std::string& commands,
                                     std::chrono::milliseconds timeout);

// The `show stat` command for the servers of every proxy (type 4 = servers; the caller keeps its
// backends' rows). Not `show stat NAME ...`: inferd fleet haproxy-config names each frontend like
// its backend, and HAProxy 2.6 resolves the name to the frontend, which has no servers.
std::string ShowStatCommand();

// Parses the CSV of one or more `show stat` answers (each starting with its "# pxname,..."
// header line) into the server rows per backend (FRONTEND/BACKEND rows and backup servers,
// bck = 1, left out: standby nodes take traffic only while every active one is down, and the
// balancer compares active nodes only).
// InvalidArgument when a header lacks pxname, svname, status, scur or stot, a row has fewer
// fields than its header, or a counter is not a number.
StatusOr<std::map<std::string, std::vector<ServerSample>>> ParseShowStat(std::string_view csv);

// Whether a server in this `show stat` status takes new requests: "UP", "UP n/m" (going down),
// "no check"; not "DOWN", "DOWN n/m", "DRAIN", "MAINT", "NOLB".
bool UsableServerStatus(std::string_view status);

// The runtime-API line applying `action` to `backend`/server: a shed disables the server's agent
// check (its next "up ready" would undo the drain) and sets state drain; a probe sets weight 1
// and state ready (the agent stays off, or it would set the weight back); a restore sets the
// configured weight ("100%" of it), state ready, and enables the agent again.
std::string ActionCommands(const std::string& backend, const BalancerAction& action);

}  // namespace inferd::tools
