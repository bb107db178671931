-- One rover bucket on Redis. Documented field by field in the module's README.md.
--
-- Called with four keys (a bucket, and the overflow bucket of a bucket used with a key):
-- KEYS[1] the bucket's hash: l = level (tokens available; negative = claimed by waiting callers),
--         t = last update (microseconds of Redis TIME), r = remainder (credit units short of a token),
--         u = the B that r is counted in, a and m = the A and the limit it was written with (with u,
--         the settings of its last write), f = tokens in flight (capped release), q = ticket counter,
--         d:<ticket> = a queued ticket's deadline, z = the reset (microseconds of Redis TIME) it last followed,
--         h = tokens held by batches (taken by instances, not granted or given back yet; they count against the
--         limit), b:<holder> = the tokens one instance's batch holds
-- KEYS[2] the retune: a, b, limit, tokens, period (ns) set through an instance's endpoint, at (when it
--         was made, microseconds of Redis TIME), mode (enforce | shadow, switched through an endpoint;
--         absent = as configured; a record may hold a mode alone, without a, b and limit), rst (the time of
--         the last reset, contract revision 3: a hash of the template, its overflow bucket or its keys whose z
--         is older is full again at its next call), and cfg, the
--         configuration they apply to (a restart with another configuration drops them); never expires. The overflow bucket passes its
--         template's, <prefix>{<bucket>}:retuned
-- KEYS[3] the leases: capped tokens in flight, member <id>#<n>, score = deadline (us); and the batches,
--         member b:<holder>, score = the deadline after which its tokens count as spent
-- KEYS[4] the queue of capped waiters: member <id>#<n>, score = arrival order
-- Called with three keys (the bucket of one key, <prefix>{<bucket>:<key>}): KEYS[1], the leases and
-- the queue. There is no retune record: the settings passed are in force (the caller passes its
-- template's retune, read with mode tune on the template's keys, and the time it was made as ARGV[10];
-- ARGV[11], the template's last reset as read with it), and the retune mode is refused.
--
-- The rate is exactly A tokens per B microseconds, so a credit unit is 1/B of a token and every
-- microsecond earns A units: integers, exact while they stay below 2^53 (checked by the client).
-- ARGV: A, B, limit (as configured), n, maxwait (us), capped (0/1),
--       mode (acquire | refund | charge | release | leave | sync | retune | peek | tune | switch | reset | batch),
--       id (<id>#<n>, capped claims; batch: <holder>#<kept>), lease (us), then for retune: A, B, limit, tokens, period (ns); for
--       switch: the bucket mode (enforce | shadow) stored for every instance; with three keys,
--       ARGV[10] is the time (us) of the retune whose settings are passed (0 or absent: the configuration)
-- Mode batch (uncapped buckets only): n = the most tokens to take (0: none), maxwait = the tokens the holder
-- gives back, id = <holder>#<kept>, the tokens of its batch it keeps; the rest of what it held is spent. Its
-- batch then holds kept + the tokens taken, until now + lease: a batch whose lease runs out counts as spent.
-- Reply: {code, wait (us), level, remainder, in flight, A, B, limit, tokens, period (ns), at (us), mode,
--        reset (us)}, and for mode batch two more: taken (the tokens taken) and kept (the tokens of its batch the
--        holder keeps; fewer than it said when its lease ran out before the call: those count as spent, and it
--        must not grant them);
-- code 1 = granted after wait, 0 = refused (wait = what was needed), 2 = capped: queued for releases
-- (nothing taken), 3 = the other modes. The last six are the retune in effect, or zeros for the
-- configuration (always zeros with three keys); mode is the bucket mode switched through an endpoint,
-- 1 = enforce, 2 = shadow, 0 = as configured (always 0 with three keys). Modes tune and switch answer
-- only these eight (and drop a retune of another configuration): they read nothing else, and switch
-- writes only the mode into the retune record. Reset is the last reset's time (0: none; with three keys,
-- the one passed). Mode reset (contract revision 3) makes the bucket full now (the level at the limit,
-- what callers owed forgotten; capped, the tokens in flight stay in flight and the queue keeps its order)
-- and, with four keys, records the reset for the overflow bucket and the keys' buckets of every instance.
--
-- A hash written with other settings than those in force (a retune, or a restart with another
-- configuration, since its last write) counts the time since its last write at the settings it was
-- written with up to the retune's time (or its last write, when that came later), and at the settings in
-- force after it: exact when the settings changed once between two writes of the hash.
local key, retuned, leases, queue
if #KEYS == 4 then
  key, retuned, leases, queue = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
elseif #KEYS == 3 then
  key, leases, queue = KEYS[1], KEYS[2], KEYS[3]
else
  return redis.error_reply('ERR the bucket script takes 4 keys (K K:retuned K:leases K:queue) or 3 (K K:leases K:queue), got ' .. #KEYS)
end
if not retuned and (ARGV[7] == 'retune' or ARGV[7] == 'tune' or ARGV[7] == 'switch') then
  return redis.error_reply('ERR mode ' .. ARGV[7] .. ' needs the retune key: a key\'s bucket is retuned through its template')
end
local A = tonumber(ARGV[1])
local B = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local maxwait = tonumber(ARGV[5])
local capped = ARGV[6] == '1'
local mode = ARGV[7]
local id = ARGV[8]
local lease = tonumber(ARGV[9])
local writes = mode ~= 'peek' and mode ~= 'tune'
local modes = {enforce = 1, shadow = 2}
if mode == 'switch' and not modes[ARGV[10]] then
  return redis.error_reply('ERR mode switch takes enforce or shadow, got ' .. tostring(ARGV[10]))
end

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])

-- the settings in effect: a retune made for this configuration, or the configuration
local cfg = ARGV[1] .. ':' .. ARGV[2] .. ':' .. ARGV[3]
local tuned = {0, 0, 0, 0, 0, 0}
-- when the settings in force were set: the retune's time (0 for the configuration)
local since = 0
-- the bucket mode switched through an endpoint: 1 enforce, 2 shadow, 0 as configured
local shared_mode = 0
-- the last reset of the template (0: none)
local reset_at = 0
if retuned then
  local tune = redis.call('HMGET', retuned, 'a', 'b', 'limit', 'tokens', 'period', 'cfg', 'at', 'mode', 'rst')
  if tune[6] then
    if tune[6] == cfg then
      reset_at = tonumber(tune[9]) or 0
      if tune[1] then
        A, B, limit = tonumber(tune[1]), tonumber(tune[2]), tonumber(tune[3])
        since = tonumber(tune[7]) or 0
        tuned = {A, B, limit, tonumber(tune[4]), tonumber(tune[5]), since}
      end
      shared_mode = modes[tune[8]] or 0
    elseif writes or mode == 'tune' then
      redis.call('DEL', retuned)
    end
  end
else
  since = tonumber(ARGV[10]) or 0
  reset_at = tonumber(ARGV[11]) or 0
end
if mode == 'switch' then
  shared_mode = modes[ARGV[10]]
  redis.call('HSET', retuned, 'mode', ARGV[10], 'cfg', cfg)
end
if mode == 'tune' or mode == 'switch' then
  return {3, 0, 0, 0, 0, tuned[1], tuned[2], tuned[3], tuned[4], tuned[5], tuned[6], shared_mode, reset_at}
end
if mode == 'reset' then
  reset_at = now
  if retuned then
    redis.call('HSET', retuned, 'rst', now, 'cfg', cfg)
  end
end

-- adds the credit of `elapsed` microseconds at a units of 1/b per microsecond, at most up to full (lim)
local function replenish(level, rem, elapsed, a, b, lim)
  local need = (lim - level) * b - rem
  if need <= 0 then
    return level, 0
  elseif elapsed >= math.ceil(need / a) then
    return lim, 0
  end
  local units = elapsed * a + rem
  local add = math.floor(units / b)
  return level + add, units - add * b
end

-- a debt (a level below zero: callers granted with a wait) carried from the rate a/b to the rate in force
-- (A/B): the callers keep the times they were given, so the debt is paid when the last of them is granted,
-- at the same microsecond as before, and tokens come at the new rate only after that (a faster rate that
-- paid the old debt sooner would hand a token out next to a waiter's: more than the limit in one interval).
-- Exact up to 2^50 credit units of the new rate (at a token per microsecond, 35 years; at 1,000 per
-- microsecond, 13 days): a longer debt is kept at 2^50 units, so that every sum stays exact in a double.
local function carry_debt(level, rem, a, b)
  local due = math.ceil(((0 - level) * b - rem) / a)
  local units = math.min(due * A, 1125899906842624)
  local owed = math.ceil(units / B)
  return 0 - owed, owed * B - units
end

local state = redis.call('HMGET', key, 'l', 't', 'r', 'f', 'u', 'a', 'm', 'z', 'h')
local level = tonumber(state[1])
local last = tonumber(state[2])
local rem = tonumber(state[3])
local inflight = tonumber(state[4])
-- tokens held by batches: they count against the limit, so the bucket never refills over them
local held = tonumber(state[9]) or 0
if mode == 'batch' and capped then
  return redis.error_reply('ERR mode batch takes an uncapped bucket')
end
if level ~= nil and (tonumber(state[8]) or 0) < reset_at then
  -- reset since its last write (here, or through the template for every instance): full now, what was owed
  -- forgotten; capped, what is in flight stays in flight
  level, last, rem = limit - held, now, 0
  state[5], state[6], state[7] = B, A, limit -- (read below as the settings it was written with: those in force)
end
if level == nil then
  -- a missing key is a bucket that has been full long enough to expire
  level, last, rem, inflight, held = limit, now, 0, 0, 0
else
  local wa, wb, wlimit = tonumber(state[6]), tonumber(state[5]), tonumber(state[7])
  if wa and wb and wlimit and (wa ~= A or wb ~= B or wlimit ~= limit) then
    -- written with other settings: they hold up to the retune (or up to the last write, when an
    -- instance that had not learned of the retune yet wrote after it), the settings in force after
    if level >= wlimit - held then
      level = wlimit - held
      rem = 0
    end
    local switched = math.min(math.max(last, since), now)
    if switched > last then
      level, rem = replenish(level, rem, switched - last, wa, wb, wlimit - held)
      last = switched
    end
  end
  if level < 0 and wa and wb and (wa ~= A or wb ~= B) then
    -- callers still waiting under the settings it was written with keep their times
    level, rem = carry_debt(level, rem, wa, wb)
  elseif wb ~= B then
    -- the remainder was counted in another rate's units: drop it (never more than a token's worth)
    rem = 0
  end
end

-- a lowered limit drops the excess (and a remainder at the limit: never more than limit tokens)
if level >= limit - held then
  level = limit - held
  rem = 0
end

-- batches whose lease ran out: their tokens count as spent (the bucket refilled over them until then)
if held > 0 then
  local expired = redis.call('ZRANGEBYSCORE', leases, '-inf', now, 'WITHSCORES')
  for i = 1, #expired, 2 do
    local member = expired[i]
    if string.sub(member, 1, 2) == 'b:' then
      local at = tonumber(expired[i + 1])
      if at > last then
        level, rem = replenish(level, rem, at - last, A, B, limit - held)
        last = at
      end
      held = held - (tonumber(redis.call('HGET', key, member)) or 0)
      if writes then
        redis.call('ZREM', leases, member)
        redis.call('HDEL', key, member)
      end
    end
  end
  held = math.max(held, 0)
end

-- replenish: the time since the last update, at most up to full
local elapsed = now - last
if elapsed > 0 then
  level, rem = replenish(level, rem, elapsed, A, B, limit - held)
  last = now
elseif elapsed < 0 then
  -- Redis's clock stepped back (a failover to a replica whose clock is behind): count from the new
  -- reading, crediting nothing for the step, rather than stall until the old reading comes back
  last = now
end

local woken = false
local function tokens_of(member)
  return tonumber(string.match(member, '#(%d+)$')) or 0
end

if capped then
  -- leases that ran out: their tokens come back (a release that comes later changes nothing); a peek
  -- counts them without writing
  local expired = redis.call('ZRANGEBYSCORE', leases, '-inf', now)
  if #expired > 0 then
    for _, member in ipairs(expired) do
      inflight = inflight - tokens_of(member)
    end
    if writes then
      redis.call('ZREMRANGEBYSCORE', leases, '-inf', now)
    end
    inflight = math.max(inflight, 0)
    woken = true
  end
end

if capped and writes then
  -- waiters that gave up without saying so (their instance died) leave the head of the queue
  while true do
    local head = redis.call('ZRANGE', queue, 0, 0)[1]
    if not head then
      break
    end
    local deadline = tonumber(redis.call('HGET', key, 'd:' .. head))
    if deadline and deadline >= now then
      break
    end
    redis.call('ZREM', queue, head)
    redis.call('HDEL', key, 'd:' .. head)
    woken = true
  end
end

local function leave_queue()
  if redis.call('ZREM', queue, id) == 1 then
    redis.call('HDEL', key, 'd:' .. id)
    woken = true
  end
end

local code = 3
local wait = 0
local taken = 0
local batch_kept = 0
if mode == 'acquire' then
  local head = capped and redis.call('ZRANGE', queue, 0, 0)[1]
  if capped and ((head and head ~= id) or inflight + n > limit) then
    -- all in flight, or others queued first: wait in line for releases
    code = 2
    if maxwait > 0 and not redis.call('ZSCORE', queue, id) then
      redis.call('ZADD', queue, redis.call('HINCRBY', key, 'q', 1), id)
      redis.call('HSET', key, 'd:' .. id, now + maxwait + 1000000)
    end
  else
    level = level - n
    if level < 0 then
      wait = math.ceil(((0 - level) * B - rem) / A)
    end
    -- while batches hold tokens, a caller takes only tokens that are there (no debt): a batch's tokens may be
    -- granted at the end of a wait too, and a batch takes nothing while callers wait (level below 1)
    if wait > maxwait or (held > 0 and wait > 0) then
      level = level + n
      code = 0
      if capped then
        leave_queue()
      end
    else
      code = 1
      if capped then
        inflight = inflight + n
        redis.call('ZADD', leases, now + wait + lease, id)
        leave_queue()
      end
    end
  end
elseif mode == 'refund' then
  level = level + n
  if level >= limit - held then
    level = limit - held
    rem = 0
  end
  if capped and redis.call('ZREM', leases, id) == 1 then
    inflight = math.max(0, inflight - tokens_of(id))
    woken = true
  end
elseif mode == 'charge' then
  -- a settled call that cost more than it took: the excess is taken now, into debt if need be, so
  -- later callers wait for it (callers already waiting hold their wait); never in flight
  level = level - n
elseif mode == 'release' then
  if redis.call('ZREM', leases, id) == 1 then
    inflight = math.max(0, inflight - tokens_of(id))
    woken = true
  end
elseif mode == 'leave' then
  leave_queue()
elseif mode == 'retune' then
  local a2, b2, limit2 = tonumber(ARGV[10]), tonumber(ARGV[11]), tonumber(ARGV[12])
  redis.call('HSET', retuned, 'a', a2, 'b', b2, 'limit', limit2, 'tokens', ARGV[13], 'period', ARGV[14], 'at', now,
    'cfg', cfg)
  local a1, b1 = A, B
  A, B, limit = a2, b2, limit2
  if level < 0 and (a1 ~= A or b1 ~= B) then
    -- callers waiting keep their times (carry_debt)
    level, rem = carry_debt(level, rem, a1, b1)
  elseif b1 ~= B then
    rem = 0
  end
  if level >= limit - held then
    level = limit - held
    rem = 0
  end
  tuned = {A, B, limit, tonumber(ARGV[13]), tonumber(ARGV[14]), now}
  woken = true
elseif mode == 'batch' then
  -- what the holder held: the tokens it gives back, those it keeps, and the rest, granted (spent)
  local holder, keep = string.match(id, '^(.+)#(%d+)$')
  if not holder then
    return redis.error_reply('ERR mode batch takes the id <holder>#<kept>, got ' .. tostring(id))
  end
  local member = 'b:' .. holder
  local had = tonumber(redis.call('HGET', key, member)) or 0
  local back = math.min(maxwait, had)
  local kept = math.min(tonumber(keep), had - back)
  held = held - had + kept
  batch_kept = kept
  level = level + back
  if level >= limit - held then
    level = limit - held
    rem = 0
  end
  -- then up to n of the tokens there now, at least one, or none and the wait for the next
  if n > 0 and level >= 1 then
    taken = math.min(n, level)
    level = level - taken
    held = held + taken
    code = 1
  elseif n > 0 then
    code = 0
    wait = math.ceil(((1 - level) * B - rem) / A)
  end
  if kept + taken > 0 then
    redis.call('HSET', key, member, kept + taken)
    redis.call('ZADD', leases, now + lease, member)
  else
    redis.call('HDEL', key, member)
    redis.call('ZREM', leases, member)
  end
end

if mode == 'reset' then
  woken = true -- capped waiters ask again
  redis.call('PUBLISH', (retuned and string.gsub(retuned, ':retuned$', '') or key) .. ':reset', tostring(now))
end

local reply = {code, wait, level, rem, inflight, tuned[1], tuned[2], tuned[3], tuned[4], tuned[5], tuned[6], shared_mode,
  reset_at}
if mode == 'batch' then
  reply[14], reply[15] = taken, batch_kept
end
if not writes then
  return reply
end

redis.call('HSET', key, 'l', level, 't', last, 'r', rem, 'f', inflight, 'u', B, 'a', A, 'm', limit, 'z',
  math.max(tonumber(state[8]) or 0, reset_at))
if state[9] or mode == 'batch' then
  -- (a hash that never held a batch has no h: its fields are those of a version before batches)
  redis.call('HSET', key, 'h', held)
end
-- expire when the bucket would be full again anyway (plus a second); leases, batches and queued tickets
-- keep it (and them) until the last of them runs out
local ttl = math.ceil(math.max(0, (limit - held - level) * B - rem) / A / 1000) + 1000
if capped or held > 0 then
  local last_lease = redis.call('ZRANGE', leases, -1, -1, 'WITHSCORES')[2]
  if last_lease then
    ttl = math.max(ttl, math.ceil((tonumber(last_lease) - now) / 1000) + 1000)
  end
  if capped and redis.call('ZCARD', queue) > 0 then
    ttl = math.max(ttl, math.ceil(maxwait / 1000) + 2000, redis.call('PTTL', key))
  end
  redis.call('PEXPIRE', leases, ttl)
  if capped then
    redis.call('PEXPIRE', queue, ttl)
  end
end
redis.call('PEXPIRE', key, ttl)
if woken then
  redis.call('PUBLISH', key .. ':woken', '1')
end
return reply
