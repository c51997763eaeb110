-- release_lease.lua: give the lease of (holder, epoch) up, keeping the epoch;
-- a no-op when they no longer hold it.
-- KEYS[1] session hash
-- ARGV[1] changes channel   ARGV[2] session id   ARGV[3] holder   ARGV[4] epoch
-- Returns {'ok'} or {'not_found'}.
local s = hgetall(KEYS[1])
if not s then return {'not_found'} end
if tonumber(s.epoch) == tonumber(ARGV[4]) and s.lease_holder == ARGV[3] then
  redis.call('HSET', KEYS[1], 'lease_holder', '', 'lease_expires_at', '')
  publish(ARGV[1], ARGV[2])
end
return {'ok'}
