-- add_viewer.lua: add (or, with renew, extend) a viewer lease; expired
-- viewers are dropped on the way.
-- KEYS[1] session hash   KEYS[2] viewers zset (expiry ms)   KEYS[3] viewer_expiry hash (ns)
-- ARGV[1] changes channel   ARGV[2] session id   ARGV[3] viewer id
-- ARGV[4] expires_at (ns)   ARGV[5] expires_at (ms)   ARGV[6] now (ns)   ARGV[7] now (ms)
-- ARGV[8] renew '1'|'0'
-- Returns {'ok'} or {'not_found'} (no session; renew: viewer gone or expired).
if redis.call('EXISTS', KEYS[1]) == 0 then return {'not_found'} end
if ARGV[8] == '1' then
  local exp = redis.call('HGET', KEYS[3], ARGV[3])
  if not exp or not ns_lt(ARGV[6], exp) then return {'not_found'} end
end
for _, v in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[7])) do
  local exp = redis.call('HGET', KEYS[3], v)
  if not exp or not ns_lt(ARGV[6], exp) then
    redis.call('ZREM', KEYS[2], v)
    redis.call('HDEL', KEYS[3], v)
  end
end
redis.call('ZADD', KEYS[2], ARGV[5], ARGV[3])
redis.call('HSET', KEYS[3], ARGV[3], ARGV[4])
publish(ARGV[1], ARGV[2])
return {'ok'}
