-- compress.lua: end the current transcript with reason compression and make
-- child (a new transcript whose parent it is) current.
-- KEYS[1] session hash   KEYS[2] transcripts hash
-- ARGV[1] changes channel   ARGV[2] session id   ARGV[3] child id   ARGV[4] now (ns)
-- Returns {'ok', child record} or {'not_found'}, {'conflict', why} (child exists),
-- {'closed'} (the current transcript has already ended).
local s = hgetall(KEYS[1])
if not s then return {'not_found'} end
local child = ARGV[3]
if redis.call('HEXISTS', KEYS[2], child) == 1 then return {'conflict', 'transcript ' .. child .. ' exists'} end
local tr = getrec(KEYS[2], s.current)
if tr.ended_at ~= '' then return {'closed'} end
tr.ended_at = ARGV[4]
tr.end_reason = 'compression'
tr.child = child
putrec(KEYS[2], s.current, tr)
local n = tonumber(s.tcount) + 1
local c = {id = child, session = ARGV[2], parent = s.current, child = '', ended_at = '',
  end_reason = '', message_count = 0, note_count = 0, created_at = ARGV[4], n = n}
putrec(KEYS[2], child, c)
redis.call('HSET', KEYS[1], 'current', child, 'tcount', n)
publish(ARGV[1], ARGV[2])
return {'ok', cjson.encode(c)}
