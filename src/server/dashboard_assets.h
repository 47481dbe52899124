// The dashboard's static files, embedded in the binary at build time (cmake/embed_files.cmake
// writes the definitions into the build folder from the files named in CMakeLists.txt).
// Each returns the file's exact bytes; the storage is static and lives for the whole program.
#pragma once

#include <string_view>

namespace inferd::server {

std::string_view DashboardIndexHtml();  // src/server/dashboard/index.html
std::string_view DashboardCss();        // src/server/dashboard/dashboard.css
std::string_view DashboardJs();         // src/server/dashboard/dashboard.js
std::string_view DashboardChartJs();    // Debian libjs-chart.js: chart.min.js (Chart.js 3.9)

}  // namespace inferd::server
