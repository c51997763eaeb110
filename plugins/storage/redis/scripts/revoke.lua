-- revoke.lua: remove a principal's grant on a session.
-- KEYS[1] session hash   KEYS[2] grants hash
-- ARGV[1] changes channel   ARGV[2] session id   ARGV[3] principal
-- Returns {'ok'}, {'not_found'} (no session) or {'no_grant'}.
if redis.call('EXISTS', KEYS[1]) == 0 then return {'not_found'} end
if redis.call('HDEL', KEYS[2], ARGV[3]) == 0 then return {'no_grant'} end
publish(ARGV[1], ARGV[2])
return {'ok'}
