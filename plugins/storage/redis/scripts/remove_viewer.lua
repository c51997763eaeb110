-- remove_viewer.lua: end a viewer lease.
-- KEYS[1] session hash   KEYS[2] viewers zset   KEYS[3] viewer_expiry hash
-- ARGV[1] changes channel   ARGV[2] session id   ARGV[3] viewer id   ARGV[4] now (ns)
-- Returns {'ok'} or {'not_found'} (no session), {'no_viewer'} (the viewer is
-- gone or expired: nothing is written, the next add_viewer prunes it).
if redis.call('EXISTS', KEYS[1]) == 0 then return {'not_found'} end
local exp = redis.call('HGET', KEYS[3], ARGV[3])
if not exp or not ns_lt(ARGV[4], exp) then return {'no_viewer'} end
redis.call('ZREM', KEYS[2], ARGV[3])
redis.call('HDEL', KEYS[3], ARGV[3])
publish(ARGV[1], ARGV[2])
return {'ok'}
