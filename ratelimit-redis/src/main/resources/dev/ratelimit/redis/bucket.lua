-- One rover bucket in one hash: l = level (tokens available; negative = claimed by waiting callers),
-- t = last update (microseconds of Redis TIME), r = remainder (credit units short of a token),
-- f = tokens in flight (capped release). The rate is exactly A tokens per B microseconds, so a credit
-- unit is 1/B of a token and every microsecond earns A units: integers, exact while they stay below
-- 2^53 (checked by the client: limit * B and the queue's debt stay far below it).
-- ARGV: A, B, limit, n, maxwait (us), capped (0/1), mode (acquire | refund | release | sync | peek)
-- Reply: {code, wait (us), level, remainder, in flight}; code 1 = granted after wait, 0 = refused
-- (wait = what was needed), 2 = capped and waiting for releases (nothing taken), 3 = the other modes.
-- peek writes nothing (a read for metrics and the endpoint); sync only banks the time that passed.
local key = KEYS[1]
local A = tonumber(ARGV[1])
local B = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local maxwait = tonumber(ARGV[5])
local capped = ARGV[6] == '1'
local mode = ARGV[7]

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])

local state = redis.call('HMGET', key, 'l', 't', 'r', 'f')
local level = tonumber(state[1])
local last = tonumber(state[2])
local rem = tonumber(state[3])
local inflight = tonumber(state[4])
if level == nil then
  -- a missing key is a bucket that has been full long enough to expire
  level, last, rem, inflight = limit, now, 0, 0
end

-- a lowered limit drops the excess
if level > limit then
  level = limit
  rem = 0
end

-- replenish: the time since the last update, at most up to full
local elapsed = now - last
if elapsed > 0 then
  local need = (limit - level) * B - rem
  if need <= 0 then
    rem = 0
  elseif elapsed >= math.ceil(need / A) then
    level = limit
    rem = 0
  else
    local units = elapsed * A + rem
    local add = math.floor(units / B)
    level = level + add
    rem = units - add * B
  end
  last = now
elseif elapsed < 0 then
  -- Redis's clock stepped back (a failover to a replica whose clock is behind): count from the new
  -- reading, crediting nothing for the step, rather than stall until the old reading comes back
  last = now
end

local code = 3
local wait = 0
if mode == 'acquire' then
  if capped and inflight + n > limit then
    code = 2
  else
    level = level - n
    if level < 0 then
      wait = math.ceil(((0 - level) * B - rem) / A)
    end
    if wait > maxwait then
      level = level + n
      code = 0
    else
      code = 1
      if capped then
        inflight = inflight + n
      end
    end
  end
elseif mode == 'refund' then
  level = math.min(limit, level + n)
  if capped then
    inflight = math.max(0, inflight - n)
  end
elseif mode == 'release' then
  inflight = math.max(0, inflight - n)
end

if mode == 'peek' then
  return {code, wait, level, rem, inflight}
end

redis.call('HSET', key, 'l', level, 't', last, 'r', rem, 'f', inflight)
-- expire when the bucket would be full again anyway (plus a second); tokens in flight keep it an hour
local ttl = math.ceil(math.max(0, (limit - level) * B - rem) / A / 1000) + 1000
if inflight > 0 then
  ttl = math.max(ttl, 3600000)
end
redis.call('PEXPIRE', key, ttl)
return {code, wait, level, rem, inflight}
