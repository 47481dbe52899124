// The live dashboard on the metrics port: a page that polls GET /metrics and charts it per model.
//
//   GET /dashboard              the page (HTML)           GET /dashboard/dashboard.js  its script
//   GET /dashboard/dashboard.css its style sheet          GET /dashboard/chart.js      Chart.js 3
// Any other /dashboard/... path is 404 and any method but GET on a dashboard path is 405
// (JSON errors, as the other routes); every other path goes to the wrapped metrics handler.
//
// The files are compiled into the binary (dashboard_assets.h), so the page works with no
// network and no files on disk; a Content-Security-Policy of 'self' makes the browser refuse any
// other origin, so the page cannot reach beyond the server it came from.
//
// The page reads the Prometheus text itself rather than a JSON endpoint of its own: the numbers
// it shows are by construction the ones a Prometheus scrape gets, new families (the instance
// gauge) show up without a server change, and rates and windowed percentiles are differences of
// two scrapes, exactly as Prometheus's rate() and histogram_quantile() compute them
// (docs/fleet.md "Dashboard").
#pragma once

#include "server/http_server.h"

namespace inferd::server {

// Serves the dashboard paths above and hands every other request to `metrics` (the
// /metrics handler: MakeMetricsHttpHandler or MakeGenerationMetricsHttpHandler).
HttpHandler MakeDashboardHttpHandler(HttpHandler metrics);

}  // namespace inferd::server
