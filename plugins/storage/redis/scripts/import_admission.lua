-- import_admission.lua: write an exported admission with its indexes
-- (seq, status, identities, request id); a no-op when present with the same
-- content. With ARGV[7] 'check' it only checks: the same answers, nothing
-- written (an import checks every record before it writes the first).
-- KEYS[1] session hash     KEYS[2] admissions hash   KEYS[3] payloads hash
-- KEYS[4] identity_lists   KEYS[5] seqs zset         KEYS[6] queued zset
-- KEYS[7] running set      KEYS[8] unknown set       KEYS[9] identities hash
-- KEYS[10] requests hash
-- ARGV[1] changes channel   ARGV[2] session id   ARGV[3] admission id
-- ARGV[4] record JSON   ARGV[5] payload   ARGV[6] identity list (NUL-joined)
-- ARGV[7] 'check' or 'write'   ARGV[8..] identities
-- Returns {'ok'} (written), {'ok', 'present'} (there already) or
-- {'not_found'} (no session), {'conflict', what}.
local s = hgetall(KEYS[1])
if not s then return {'not_found'} end
local id = ARGV[3]
local rec = cjson.decode(ARGV[4])
local old = getrec(KEYS[2], id)
if old then
  for k, v in pairs(rec) do
    if old[k] ~= v then return {'conflict', k} end
  end
  for k, _ in pairs(old) do
    if rec[k] == nil then return {'conflict', k} end
  end
  if redis.call('HGET', KEYS[3], id) ~= ARGV[5] then return {'conflict', 'payload'} end
  if (redis.call('HGET', KEYS[4], id) or '') ~= ARGV[6] then return {'conflict', 'identities'} end
  return {'ok', 'present'}
end
for i = 8, #ARGV do
  local holder = redis.call('HGET', KEYS[9], ARGV[i])
  if holder and holder ~= id then return {'conflict', 'identity held by ' .. holder} end
end
local rkey = rec.principal .. '\0' .. rec.request_id
if rec.kind == 'human' and rec.request_id ~= '' then
  local holder = redis.call('HGET', KEYS[10], rkey)
  if holder and holder ~= id then return {'conflict', 'request id held by ' .. holder} end
end
if redis.call('ZCOUNT', KEYS[5], rec.seq, rec.seq) > 0 then return {'conflict', 'seq'} end
if ARGV[7] == 'check' then return {'ok'} end
putrec(KEYS[2], id, rec)
redis.call('HSET', KEYS[3], id, ARGV[5])
if ARGV[6] ~= '' then redis.call('HSET', KEYS[4], id, ARGV[6]) end
redis.call('ZADD', KEYS[5], rec.seq, id)
if rec.status == 'queued' then redis.call('ZADD', KEYS[6], rec.seq, id)
elseif rec.status == 'running' then redis.call('SADD', KEYS[7], id)
elseif rec.status == 'unknown' then redis.call('SADD', KEYS[8], id) end
for i = 8, #ARGV do redis.call('HSET', KEYS[9], ARGV[i], id) end
if rec.kind == 'human' and rec.request_id ~= '' then redis.call('HSET', KEYS[10], rkey, id) end
if rec.seq >= tonumber(s.next_seq) then redis.call('HSET', KEYS[1], 'next_seq', rec.seq + 1) end
publish(ARGV[1], ARGV[2])
return {'ok'}
