-- grant.lua: allow a principal to admit to a session besides its owner.
-- KEYS[1] session hash   KEYS[2] grants set
-- ARGV[1] changes channel   ARGV[2] session id   ARGV[3] principal
-- Returns {'ok'} or {'not_found'}.
if redis.call('EXISTS', KEYS[1]) == 0 then return {'not_found'} end
redis.call('SADD', KEYS[2], ARGV[3])
publish(ARGV[1], ARGV[2])
return {'ok'}
