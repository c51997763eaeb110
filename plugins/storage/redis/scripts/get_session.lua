-- get_session.lua: read a session, its counters and its current transcript in
-- one consistent snapshot (writes nothing).
-- KEYS[1] session hash    KEYS[2] grants hash    KEYS[3] transcripts hash
-- KEYS[4] queued zset     KEYS[5] running set    KEYS[6] unknown set
-- KEYS[7] viewers zset
-- ARGV[1] wall-clock now (unix ms): viewers expiring after it are live
-- Returns {'not_found'} or {'ok', flat session hash, flat grants hash, queued, running,
--          unknown, live viewers, current transcript record or ''}
local flat = redis.call('HGETALL', KEYS[1])
if #flat == 0 then return {'not_found'} end
local cur = ''
for i = 1, #flat, 2 do
  if flat[i] == 'current' then cur = redis.call('HGET', KEYS[3], flat[i + 1]) or '' end
end
return {'ok', flat, redis.call('HGETALL', KEYS[2]), redis.call('ZCARD', KEYS[4]),
  redis.call('SCARD', KEYS[5]), redis.call('SCARD', KEYS[6]),
  redis.call('ZCOUNT', KEYS[7], '(' .. ARGV[1], '+inf'), cur}
