-- renew_lease.lua: extend the lease of (holder, epoch). The expiry only
-- moves forward: a renewal that reaches the server late (sent before one
-- that already ran) never shortens the lease its holder counts on.
-- KEYS[1] session hash
-- ARGV[1] changes channel   ARGV[2] session id   ARGV[3] holder   ARGV[4] epoch
-- ARGV[5] expires_at (ns)
-- Returns {'ok', expires_at} or {'not_found'}, {'fenced'} (epoch or holder
-- changed).
local s = hgetall(KEYS[1])
if not s then return {'not_found'} end
if tonumber(s.epoch) ~= tonumber(ARGV[4]) or s.lease_holder ~= ARGV[3] then return {'fenced'} end
local exp = s.lease_expires_at
if ns_lt(exp, ARGV[5]) then
  exp = ARGV[5]
  redis.call('HSET', KEYS[1], 'lease_expires_at', exp)
end
publish(ARGV[1], ARGV[2])
return {'ok', exp}
