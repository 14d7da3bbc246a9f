-- wrk's script for `npm run bench:verify` (bench/verify-wrk.ts): every request a body never sent before.
--   wrk -s bench/verify-bodies.lua URL -- <bodies file> <threads> <X402-Version or "-">
-- The file holds one JSON body a line (pre-signed, each a fresh authorization). Thread k of n sends lines
-- k, k+n, k+2n, … in order, each once, on whichever of its connections is free: no body is sent twice, by
-- any thread or connection. A thread that runs out stops (and says so): a body is never reused.
-- Each answer is checked (200 and `{"isValid":true…`); done() prints one line `WRK_JSON {…}`.
local threads = {}

function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end

function init(args)
  local count = tonumber(args[2])
  bodies = {}
  local line_number = 0
  for line in io.lines(args[1]) do
    if line_number % count == id then bodies[#bodies + 1] = line end
    line_number = line_number + 1
  end
  available = #bodies
  headers = { ["Content-Type"] = "application/json" }
  if args[3] ~= "-" then headers["X402-Version"] = args[3] end
  sent = 0
  valid = 0
  invalid = 0
  exhausted = 0
  first_invalid = ""
end

function request()
  sent = sent + 1
  local body = bodies[sent]
  if body == nil then
    -- Out of bodies: stop rather than repeat one (this request goes nowhere useful and is counted invalid).
    exhausted = 1
    wrk.thread:stop()
    return wrk.format("GET", "/bench-ran-out-of-bodies")
  end
  bodies[sent] = nil
  return wrk.format("POST", wrk.path, headers, body)
end

function response(status, _headers, body)
  if status == 200 and string.sub(body, 1, 15) == '{"isValid":true' then
    valid = valid + 1
  else
    invalid = invalid + 1
    if first_invalid == "" then first_invalid = status .. " " .. string.sub(body, 1, 200) end
  end
end

local function text(s)
  return '"' .. string.gsub(string.gsub(s, '[\\"]', "'"), "[%c]", " ") .. '"'
end

function done(summary, latency, _requests)
  local totals = { valid = 0, invalid = 0, sent = 0, available = 0, exhausted = 0 }
  local first = ""
  for _, thread in ipairs(threads) do
    for key, _ in pairs(totals) do totals[key] = totals[key] + thread:get(key) end
    if first == "" then first = thread:get("first_invalid") end
  end
  local errors = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests":%d,"durationUs":%d,"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
      '"latencyUs":{"p50":%d,"p90":%d,"p99":%d,"max":%d,"mean":%.1f},"valid":%d,"invalid":%d,"sent":%d,"available":%d,"exhausted":%d,"firstInvalid":%s}\n',
    summary.requests, summary.duration, errors.connect, errors.read, errors.write, errors.status, errors.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean,
    totals.valid, totals.invalid, totals.sent, totals.available, totals.exhausted, text(first)))
end
