-- Appended to pixel.lua for paced runs: the third script argument is the
-- interval, in milliseconds, between two requests of one wrk thread.
-- delay() hands out send slots on a per-thread schedule (like wrk2's
-- constant throughput), so the rate holds whatever the latency, as long as
-- enough connections are free.
local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } tt_timespec;
int clock_gettime(int clk, tt_timespec *ts);
]]
local ts = ffi.new("tt_timespec")
local function now_ms()
  ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
end

local next_slot = nil

function delay()
  local now = now_ms()
  if next_slot == nil or next_slot < now then next_slot = now end
  local wait = next_slot - now
  next_slot = next_slot + pause
  -- wrk takes whole milliseconds; rounding down keeps the schedule ahead.
  return math.floor(wait)
end
