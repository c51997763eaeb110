-- remove_viewer.lua: end a viewer lease (a no-op when it is gone).
-- KEYS[1] session hash   KEYS[2] viewers zset   KEYS[3] viewer_expiry hash
-- ARGV[1] changes channel   ARGV[2] session id   ARGV[3] viewer id
-- Returns {'ok'} or {'not_found'} (no session).
if redis.call('EXISTS', KEYS[1]) == 0 then return {'not_found'} end
redis.call('ZREM', KEYS[2], ARGV[3])
redis.call('HDEL', KEYS[3], ARGV[3])
publish(ARGV[1], ARGV[2])
return {'ok'}
