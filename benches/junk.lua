-- wrk script for the page cap's junk flood: every request a new random path,
-- spread over the sites given (issue 29).
-- Usage: wrk ... -s benches/junk.lua URL -- <site-id>[,<site-id>...]
local sites = {}
local counter = 0
local ua = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"

function setup(thread)
  counter = counter + 1
  thread:set("id", counter)
end

function init(args)
  for s in string.gmatch(args[1], "[^,]+") do
    table.insert(sites, s)
  end
  math.randomseed(os.time() * 1000 + (id or 0))
end

function request()
  local site = sites[math.random(#sites)]
  local path = string.format("/junk/%08x%08x", math.random(0, 0x7fffffff), math.random(0, 0x7fffffff))
  return wrk.format("GET", "/pixel.gif?site=" .. site .. "&page=" .. path, { ["User-Agent"] = ua })
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH {"requests":%d,"duration_us":%d,"status_errors":%d,"connect_errors":%d,"read_errors":%d,"write_errors":%d,"timeouts":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d}\n',
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
