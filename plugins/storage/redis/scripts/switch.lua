-- switch.lua: point the session at transcript t: one of its own, or a new
-- empty one named t.
-- KEYS[1] session hash   KEYS[2] transcripts hash
-- ARGV[1] changes channel   ARGV[2] session id   ARGV[3] transcript id   ARGV[4] now (ns)
-- Returns {'ok', transcript record} or {'not_found'}.
local s = hgetall(KEYS[1])
if not s then return {'not_found'} end
local t = ARGV[3]
local tr = getrec(KEYS[2], t)
if not tr then
  local n = tonumber(s.tcount) + 1
  tr = {id = t, session = ARGV[2], parent = '', child = '', ended_at = '', end_reason = '',
    message_count = 0, note_count = 0, created_at = ARGV[4], n = n}
  putrec(KEYS[2], t, tr)
  redis.call('HSET', KEYS[1], 'tcount', n)
end
redis.call('HSET', KEYS[1], 'current', t)
publish(ARGV[1], ARGV[2])
return {'ok', cjson.encode(tr)}
