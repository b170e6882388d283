-- wrk script for Tickertape's pixel: pages /p/1 .. /p/N of one site, with
-- Zipf popularity (page k is requested in proportion to 1/k), or uniform,
-- or "junk": a new random path every request, over the comma-separated
-- site ids given (the page cap's flood).
-- Usage: wrk ... -s benches/pixel.lua URL -- <site-id>[,...] <pages> [interval-ms] [zipf|uniform|junk]
-- The interval is only read by benches/pace.lua, which the bench appends
-- for paced runs.
-- Each request comes from one of BENCH_VISITORS visitors (default 100,000),
-- told apart by their User-Agent (wrk has one address), so the server makes
-- visitor ids and visits as it would for real traffic.
local threads = {}
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("id", counter)
  table.insert(threads, thread)
end

local site, pages
local pause = 0
local uniform = false
local junk = false
local sites = {}
local cdf = {}
-- Real browsers' User-Agents, so the breakdowns classify as they would
-- for real traffic.
local uas = {
  "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
  "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0",
  "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
  "Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/26.0 Chrome/122.0.0.0 Mobile Safari/537.36",
  "Mozilla/5.0 (Macintosh; Intel Mac OS X 10.15; rv:133.0) Gecko/20100101 Firefox/133.0",
}
local visitors = tonumber(os.getenv("BENCH_VISITORS") or "100000")
-- BENCH_PROPS=1: every view carries two custom properties (one of 20
-- authors, one of 4 plans), as tt.js's data-prop-* would send them, and
-- one request in 20 is instead a Purchase event on the page with a plan
-- and revenue, as tickertape.track("Purchase", {plan}, {amount, currency})
-- sends it: what a switching site's hits carry.
local props = os.getenv("BENCH_PROPS") == "1"

-- One visitor's headers, picked at random.
local function headers()
  local v = math.random(visitors)
  return { ["User-Agent"] = uas[v % #uas + 1] .. " v/" .. v }
end

-- What tt.js sends besides the page: a referrer (one of 40 hosts), the
-- screen width, and on one view in five a campaign, so every breakdown
-- has names to count.
local widths = { "390", "820", "1440", "1920" }
local function extra(page)
  local n = math.random(200)
  local q = page
  if n <= 40 then
    q = q .. "%3Futm_medium%3Dm" .. (n % 4) .. "%26utm_campaign%3Dc" .. (n % 20)
  end
  q = q .. "&ref=https%3A%2F%2Fs" .. (n % 40) .. ".example%2F&w=" .. widths[n % 4 + 1]
  if props and n % 20 == 0 then
    return page .. "&e=Purchase&props=%7B%22plan%22%3A%22p" .. (n % 4) .. "%22%7D"
      .. "&revenue=%7B%22amount%22%3A%229.99%22%2C%22currency%22%3A%22EUR%22%7D"
  end
  if props then
    q = q .. "&props=%7B%22author%22%3A%22a" .. (n % 20) .. "%22%2C%22plan%22%3A%22p" .. (n % 4) .. "%22%7D"
  end
  return q
end

function init(args)
  site = args[1]
  pages = tonumber(args[2]) or 1000
  pause = tonumber(args[3]) or 0
  uniform = args[4] == "uniform"
  junk = args[4] == "junk"
  for s in string.gmatch(site, "[^,]+") do
    table.insert(sites, s)
  end
  local sum = 0
  for i = 1, pages do
    sum = sum + 1 / i
    cdf[i] = sum
  end
  for i = 1, pages do
    cdf[i] = cdf[i] / sum
  end
  math.randomseed(os.time() * 1000 + (id or 0))
end

function request()
  if junk then
    local path = string.format("/junk/%08x%08x", math.random(0, 0x7fffffff), math.random(0, 0x7fffffff))
    return wrk.format("GET", "/pixel.gif?site=" .. sites[math.random(#sites)] .. "&page=" .. path, headers())
  end
  if uniform then
    return wrk.format("GET", "/pixel.gif?site=" .. site .. "&page=" .. extra("/p/" .. math.random(pages)), headers())
  end
  local r = math.random()
  local lo, hi = 1, pages
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if cdf[mid] < r then lo = mid + 1 else hi = mid end
  end
  return wrk.format("GET", "/pixel.gif?site=" .. site .. "&page=" .. extra("/p/" .. lo), headers())
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH {"requests":%d,"duration_us":%d,"status_errors":%d,"connect_errors":%d,"read_errors":%d,"write_errors":%d,"timeouts":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d}\n',
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
