-- import_session.lua: write an exported session record; a no-op when the
-- same session is present with the same content. With ARGV[9] 'check' it
-- only checks: the same answers, nothing written.
-- KEYS[1] session hash   KEYS[2] grants hash
-- ARGV[1] changes channel   ARGV[2] session id   ARGV[3] owner   ARGV[4] current
-- ARGV[5] epoch   ARGV[6] generation   ARGV[7] next_seq   ARGV[8] created_at (ns)
-- ARGV[9] 'check' or 'write'
-- ARGV[10..] grants: principal, grant JSON, principal, grant JSON…
-- Returns {'ok'} (written), {'ok', 'present'} (there already) or
-- {'conflict', field}.
local s = hgetall(KEYS[1])
if s then
  local want = {owner = ARGV[3], current = ARGV[4], epoch = ARGV[5], generation = ARGV[6],
    next_seq = ARGV[7], created_at = ARGV[8]}
  for k, v in pairs(want) do
    if tostring(s[k]) ~= v then return {'conflict', k} end
  end
  local n = 0
  for i = 10, #ARGV, 2 do
    if redis.call('HGET', KEYS[2], ARGV[i]) ~= ARGV[i + 1] then return {'conflict', 'grants'} end
    n = n + 1
  end
  if redis.call('HLEN', KEYS[2]) ~= n then return {'conflict', 'grants'} end
  return {'ok', 'present'}
end
if ARGV[9] == 'check' then return {'ok'} end
redis.call('HSET', KEYS[1], 'id', ARGV[2], 'owner', ARGV[3], 'current', ARGV[4], 'epoch', ARGV[5],
  'generation', ARGV[6], 'next_seq', ARGV[7], 'created_at', ARGV[8], 'lease_holder', '',
  'lease_expires_at', '', 'tcount', 0)
for i = 10, #ARGV, 2 do redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1]) end
publish(ARGV[1], ARGV[2])
return {'ok'}
