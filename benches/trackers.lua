-- wrk script for the peers' endpoints beside the pixel: the same
-- pages (uniform over /p/1 .. /p/N of bench.test) and visitors, through
-- one route per run.
-- Usage: wrk ... -s benches/trackers.lua URL -- <site-id> <pages> <pixel|plausible|umami|goatcounter>
local site, pages, mode
local uas = {
  "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
  "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
  "Mozilla/5.0 (Macintosh; Intel Mac OS X 10.15; rv:133.0) Gecko/20100101 Firefox/133.0",
}
local visitors = 100000

function init(args)
  site = args[1]
  pages = tonumber(args[2]) or 1000
  mode = args[3] or "pixel"
  math.randomseed(os.time() * 1000 + math.random(100000))
end

local function ua()
  local v = math.random(visitors)
  return uas[v % #uas + 1] .. " v/" .. v
end

function request()
  local page = "/p/" .. math.random(pages)
  if mode == "plausible" then
    return wrk.format("POST", "/api/event",
      { ["User-Agent"] = ua(), ["Content-Type"] = "text/plain" },
      '{"n":"pageview","u":"https://bench.test' .. page .. '","d":"bench.test","r":"https://s1.example/"}')
  elseif mode == "umami" then
    return wrk.format("POST", "/api/send",
      { ["User-Agent"] = ua(), ["Content-Type"] = "application/json" },
      '{"type":"event","payload":{"website":"' .. site .. '","hostname":"bench.test","url":"' .. page ..
      '","referrer":"https://s1.example/","screen":"1440x900"}}')
  elseif mode == "goatcounter" then
    return wrk.format("GET", "/count?p=" .. page .. "&r=https%3A%2F%2Fs1.example%2F&s=1440%2C900%2C1",
      { ["User-Agent"] = ua(), ["Referer"] = "https://bench.test" .. page })
  end
  return wrk.format("GET", "/pixel.gif?site=" .. site .. "&page=" .. page .. "&ref=https%3A%2F%2Fs1.example%2F&w=1440",
    { ["User-Agent"] = ua() })
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH {"requests":%d,"duration_us":%d,"status_errors":%d,"connect_errors":%d,"read_errors":%d,"write_errors":%d,"timeouts":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d}\n',
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
