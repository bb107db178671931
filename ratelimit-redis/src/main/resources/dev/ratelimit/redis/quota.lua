-- A calendar quota on Redis (contract revision 3, "Calendar quotas"): a fixed allowance per calendar
-- period, all there at the period's start, nothing carried over. Protocol: RedisCalendarQuota (Java), which
-- computes the periods with java.time (zones, daylight-saving changes, month lengths) and passes them here;
-- this script checks Redis's TIME against them, so every instance counts the same periods.
--
-- KEYS[1]  the quota's hash: <prefix>{<bucket>}, <prefix>{<bucket>}:overflow or <prefix>{<bucket>:<key>}
-- ARGV[1]  mode: take | refund | charge | cancel | peek | reset
-- ARGV[2]  n, the tokens (0 for peek and reset)
-- ARGV[3]  limit, the tokens per period (this instance's settings in force)
-- ARGV[4]  the start of the period the caller computed, microseconds since the epoch
-- ARGV[5]  its end (the next boundary), microseconds
-- ARGV[6]  the end of the period after it, microseconds
-- ARGV[7]  take: the longest the caller may wait, microseconds (a wait goes to the next boundary only)
-- ARGV[8]  cancel: the start of the period the claim was counted in
--
-- The hash: s, e = the start and end of the period it counts (microseconds); u = the tokens taken in it
-- (more than the limit only through charges: a debt, paid by the next period's allowance); w = the
-- tokens claimed in the next period by callers that wait for its start. It expires at the end of the
-- period it counts (PEXPIREAT), or of the next one while callers wait for it: a quota idle for a whole
-- period leaves nothing in Redis, and a restart of every instance keeps the count until then.
--
-- Reply: { code, used, micros, now, start, end, waiting }
--   code 1: granted now; 2: granted at the boundary `end`, in `micros` (the wait); 0: refused, `micros`
--   is the time until the tokens could be there (the retry-after); 3: done (refund, charge, cancel,
--   peek, reset); -1: TIME is not within the periods passed (the instance's wall clock is off): `now`
--   is Redis's time, to compute the periods from and ask again.
--   used: the tokens taken in the period [start, end) after the call; waiting: claimed in the next one.

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])

local key = KEYS[1]
local mode = ARGV[1]
local n = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local start = tonumber(ARGV[4])
local finish = tonumber(ARGV[5])
local after = tonumber(ARGV[6])

if now < start or now >= after then
	return { -1, 0, 0, now, 0, 0, 0 }
end
-- the boundary passed between the caller's clock and this call: the period is the next one, and the
-- one after it is not known here (a wait stops at this period's end)
local known_next = true
if now >= finish then
	start = finish
	finish = after
	known_next = false
end

local state = redis.call('HMGET', key, 's', 'e', 'u', 'w')
local s = tonumber(state[1])
if s ~= nil and tonumber(state[2]) == nil then
	-- not a quota's hash (the name was a token bucket's before): it starts over as a quota
	redis.call('DEL', key)
	s = nil
end
local used = 0
local waiting = 0
if s ~= nil then
	local e = tonumber(state[2])
	local u = tonumber(state[3])
	local w = tonumber(state[4])
	if s == start then
		used = u
		waiting = w
	elseif s > start then
		-- the hash counts a later period than this call's clock: time never opens a period twice
		start = s
		finish = e
		used = u
		waiting = w
		known_next = false
	elseif e == start then
		-- the period the hash counted ended at this one's start: its waiters' claims are this period's,
		-- and a debt is paid by one allowance
		used = math.max(0, u - limit) + w
	end
end

local function store()
	redis.call('HSET', key, 's', start, 'e', finish, 'u', used, 'w', waiting)
	if waiting == 0 then
		redis.call('PEXPIREAT', key, math.floor(finish / 1000))
	elseif known_next then
		redis.call('PEXPIREAT', key, math.floor(after / 1000))
	end
	-- (callers waiting for a next period not known here: the expiry set when they claimed it stays)
end

if mode == 'take' then
	if used + n <= limit then
		used = used + n
		store()
		return { 1, used, 0, now, start, finish, waiting }
	end
	local until_boundary = finish - now
	local max_wait = tonumber(ARGV[7])
	if known_next and waiting + n <= limit and until_boundary <= max_wait then
		waiting = waiting + n
		store()
		return { 2, used, until_boundary, now, start, finish, waiting }
	end
	local retry = until_boundary
	if known_next and waiting + n > limit then
		retry = after - now
	end
	return { 0, used, retry, now, start, finish, waiting }
elseif mode == 'refund' then
	used = math.max(0, used - n)
	store()
elseif mode == 'charge' then
	used = used + n
	store()
elseif mode == 'cancel' then
	local counted = tonumber(ARGV[8])
	if counted == start then
		used = math.max(0, used - n)
	elseif counted == finish then
		waiting = math.max(0, waiting - n)
	end
	store()
elseif mode == 'reset' then
	used = 0
	store()
elseif mode ~= 'peek' then
	return redis.error_reply('ERR unknown mode ' .. tostring(mode))
end
return { 3, used, 0, now, start, finish, waiting }
