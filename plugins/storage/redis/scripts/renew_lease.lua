-- renew_lease.lua: extend the lease of (holder, epoch).
-- KEYS[1] session hash
-- ARGV[1] changes channel   ARGV[2] session id   ARGV[3] holder   ARGV[4] epoch
-- ARGV[5] expires_at (ns)
-- Returns {'ok'} or {'not_found'}, {'fenced'} (epoch or holder changed).
local s = hgetall(KEYS[1])
if not s then return {'not_found'} end
if tonumber(s.epoch) ~= tonumber(ARGV[4]) or s.lease_holder ~= ARGV[3] then return {'fenced'} end
redis.call('HSET', KEYS[1], 'lease_expires_at', ARGV[5])
publish(ARGV[1], ARGV[2])
return {'ok'}
