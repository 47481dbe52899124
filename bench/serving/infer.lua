-- wrk script: POSTs one KServe v2 infer request per call and prints a JSON summary line.
--   wrk -t1 -c64 -d10s -s bench/serving/infer.lua http://127.0.0.1:8000 -- MODEL BODY_FILE [N]
-- BODY_FILE holds the body (bench/serving/run_bench.py writes them): JSON, or with N the binary
-- tensor extension (the first N bytes are the JSON header, sent as Inference-Header-Content-Length). The summary line starts
-- with "WRK_JSON " and holds requests/s, latency percentiles (µs) and error counts; non-2xx
-- answers count as errors, so a misconfigured run cannot pass for a fast one.
local model, body_file, header_length

function init(args)
  model = args[1] or "identity"
  body_file = args[2]
  header_length = args[3]
  local body = '{"inputs":[{"name":"x","datatype":"FP32","shape":[1,16],' ..
               '"data":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]}]}'
  if body_file then
    local f = assert(io.open(body_file, "rb"))
    body = f:read("*a")
    f:close()
  end
  wrk.method = "POST"
  wrk.path = "/v2/models/" .. model .. "/infer"
  wrk.body = body
  if header_length then
    wrk.headers["Content-Type"] = "application/octet-stream"
    wrk.headers["Inference-Header-Content-Length"] = header_length
  else
    wrk.headers["Content-Type"] = "application/json"
  end
end

function done(summary, latency, requests)
  local errors = summary.errors
  local s = summary.duration / 1e6
  io.write(string.format(
    'WRK_JSON {"requests": %d, "seconds": %.3f, "rps": %.1f, "p50_us": %d, "p90_us": %d, ' ..
    '"p99_us": %d, "max_us": %d, "mean_us": %.1f, "non2xx": %d, "connect_errors": %d, ' ..
    '"read_errors": %d, "write_errors": %d, "timeouts": %d}\n',
    summary.requests, s, summary.requests / s, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.max, latency.mean, errors.status, errors.connect, errors.read,
    errors.write, errors.timeout))
end
