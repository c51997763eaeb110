-- grant.lua: give a principal a role on a session, replacing its grant.
-- KEYS[1] session hash   KEYS[2] grants hash (principal -> grant JSON)
-- ARGV[1] changes channel   ARGV[2] session id   ARGV[3] principal
-- ARGV[4] grant JSON {"role":…,"producers":[…]}   ARGV[5] most grants a session may have
-- Returns {'ok'}, {'not_found'}, {'owner'} (the principal owns the session)
-- or {'conflict', 'limit'} (the session has ARGV[5] grants already).
if redis.call('EXISTS', KEYS[1]) == 0 then return {'not_found'} end
if redis.call('HGET', KEYS[1], 'owner') == ARGV[3] then return {'owner'} end
if redis.call('HEXISTS', KEYS[2], ARGV[3]) == 0 and redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[5]) then
  return {'conflict', 'limit'}
end
redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
publish(ARGV[1], ARGV[2])
return {'ok'}
