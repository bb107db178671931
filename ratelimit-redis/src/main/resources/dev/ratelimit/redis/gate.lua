-- What the servers said about one bucket's outbound calls (contract revision 3, "Outbound calls"), kept
-- beside the bucket so that every instance's next call after an answer sees it. The Redis twin of the
-- starter's ServerGate (design notes G1-G4 there); RedisServerGate is its Java side.
--
-- KEYS[1]: <key-prefix>{<bucket>}:gate, or <key-prefix>{<bucket>:<key>}:gate for a key's bucket (the bucket's
--          hash tag: the same slot as the bucket's own keys), a hash:
--   s  tokens of the calls that passed the gate: a counter that starts at b
--   b  where s started: the clock (microseconds) when the hash was made, so that a mark taken before the
--      hash expired is never above a mark taken after it was made again (at below a token per microsecond)
--   p  the end of the pause (microseconds of the clock; 0: none)
--   l  the lowerings in force, "cap,reset;cap,reset...": sorted by reset, strictly increasing, and their
--      caps on s strictly increasing too (G1)
--   f  the calls out, "mark,cost,passed;...": passed and not done yet (G5: an answer's cap subtracts the
--      tokens of the calls out whose mark is below the answered one's); a call passed `keep` ago or more
--      is no longer counted (its end was never reported)
-- The hash expires when its last pause or reset is over, and not before `keep` after the last write (the
-- answers of calls still out find the counter their mark refers to).
--
-- ARGV[1] mode, ARGV[2] the clock in microseconds (empty: Redis TIME; tests drive the script with theirs), then:
--   delay  n                                 -> {0, wait}
--   pass   n keep                            -> {mark, 0}, or {-1, wait} when held back (nothing written)
--   unpass n mark                            -> {0, 0}
--   done   n mark                            -> {0, 0}
--   pause  micros keep                       -> {0, 0}
--   lower  remaining mark micros keep max    -> {0, 0}
--   level                                    -> {level, 0}, {0, 1} while paused, {-1, 0} when nothing holds back
-- Times (wait, micros, keep) are microseconds from now. Every number stays an integer below 2^53.

local key = KEYS[1]
local mode = ARGV[1]
local now
if ARGV[2] ~= '' then
  now = tonumber(ARGV[2])
else
  local clock = redis.call('TIME')
  now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
end

local f = redis.call('HMGET', key, 's', 'b', 'p', 'l', 'f')
local exists = f[1] ~= false
local sent = tonumber(f[1]) or now
local base = tonumber(f[2]) or now
local pause = tonumber(f[3]) or 0
local steps = {}
if f[4] then
  for c, r in string.gmatch(f[4], '(%d+),(%d+)') do
    local reset = tonumber(r)
    if reset > now then -- G3: past its reset a step is gone
      steps[#steps + 1] = {tonumber(c), reset}
    end
  end
end

-- G5: the calls out, those passed within the horizon (KEEP_MICROS, as the hash is kept)
local horizon = now - 60000000
local flight = {}
if f[5] then
  for m, c, t in string.gmatch(f[5], '(%d+),(%d+),(%d+)') do
    if tonumber(t) > horizon then
      flight[#flight + 1] = {tonumber(m), tonumber(c), tonumber(t)}
    end
  end
end

local function land(mark, n)
  for i = #flight, 1, -1 do
    if flight[i][1] == mark and flight[i][2] == n then
      table.remove(flight, i)
      return true
    end
  end
  return false
end

local function delay(n)
  local wait = 0
  if pause > now then
    wait = pause - now
  end
  local lowered = 0
  for i = 1, #steps do
    if steps[i][1] - sent >= n then
      break -- G1: every later step's cap is higher
    end
    lowered = steps[i][2] - now
  end
  if lowered > wait then
    wait = lowered
  end
  return wait
end

local function fmt(x)
  return string.format('%.0f', x)
end

local function save(keep)
  local parts = {}
  for i = 1, #steps do
    parts[i] = fmt(steps[i][1]) .. ',' .. fmt(steps[i][2])
  end
  local out = {}
  for i = 1, #flight do
    out[i] = fmt(flight[i][1]) .. ',' .. fmt(flight[i][2]) .. ',' .. fmt(flight[i][3])
  end
  redis.call('HMSET', key, 's', fmt(sent), 'b', fmt(base), 'p', fmt(pause), 'l', table.concat(parts, ';'),
    'f', table.concat(out, ';'))
  local last = now + keep
  if pause > last then
    last = pause
  end
  if #steps > 0 and steps[#steps][2] > last then
    last = steps[#steps][2]
  end
  redis.call('PEXPIRE', key, math.ceil((last - now) / 1000))
end

if mode == 'delay' then
  return {0, delay(tonumber(ARGV[3]))}
elseif mode == 'level' then
  if pause > now then
    return {0, 1}
  elseif #steps == 0 then
    return {-1, 0}
  end
  local level = steps[1][1] - sent
  if level < 0 then
    level = 0
  end
  return {level, 0}
elseif mode == 'pass' then
  local n = tonumber(ARGV[3])
  local wait = delay(n)
  if wait > 0 then
    return {-1, wait}
  end
  sent = sent + n
  flight[#flight + 1] = {sent, n, now}
  save(tonumber(ARGV[4]))
  return {sent, 0}
elseif mode == 'unpass' then
  if exists then
    local n = tonumber(ARGV[3])
    land(tonumber(ARGV[4]), n)
    local out = {}
    for i = 1, #flight do
      out[i] = fmt(flight[i][1]) .. ',' .. fmt(flight[i][2]) .. ',' .. fmt(flight[i][3])
    end
    redis.call('HSET', key, 's', fmt(sent - n), 'f', table.concat(out, ';'))
  end
  return {0, 0}
elseif mode == 'done' then
  if exists and land(tonumber(ARGV[4]), tonumber(ARGV[3])) then
    local out = {}
    for i = 1, #flight do
      out[i] = fmt(flight[i][1]) .. ',' .. fmt(flight[i][2]) .. ',' .. fmt(flight[i][3])
    end
    redis.call('HSET', key, 'f', table.concat(out, ';'))
  end
  return {0, 0}
elseif mode == 'pause' then
  local ends = now + tonumber(ARGV[3])
  if ends > pause then -- a longer pause in force stays
    pause = ends
  end
  save(tonumber(ARGV[4]))
  return {0, 0}
elseif mode == 'lower' then
  local remaining = tonumber(ARGV[3])
  local mark = tonumber(ARGV[4])
  local reset = now + tonumber(ARGV[5])
  local keep = tonumber(ARGV[6])
  local max = tonumber(ARGV[7])
  if reset <= now then
    return {0, 0}
  end
  if mark < base then -- answering a call counted before the hash was made (again): counted as at its start
    mark = base
  end
  local cap = remaining + mark
  for i = 1, #flight do -- G5: the calls out that passed before the answered one
    if flight[i][1] < mark then
      cap = cap - flight[i][2]
    end
  end
  local at = 1
  while at <= #steps and steps[at][2] < reset do
    at = at + 1
  end
  -- G1: a step that resets no later with a cap no lower is dominated by this one
  for i = at - 1, 1, -1 do
    if steps[i][1] >= cap then
      table.remove(steps, i)
      at = at - 1
    end
  end
  -- this one is dominated by a step that resets no earlier with a cap no higher (G2: it never raises)
  for i = at, #steps do
    if steps[i][1] <= cap then
      return {0, 0}
    end
  end
  if at <= #steps and steps[at][2] == reset then
    steps[at] = {cap, reset}
  else
    table.insert(steps, at, {cap, reset})
  end
  if #steps > max then -- G4: the two earliest become one, the lower cap until the later reset
    local first = table.remove(steps, 1)
    steps[1] = {first[1], steps[1][2]}
  end
  save(keep)
  return {0, 0}
end
return redis.error_reply('ERR gate mode ' .. tostring(mode) .. ' is not one of delay, pass, unpass, done, pause, lower, level')
