-- import_transcript.lua: write an exported transcript (its counters grow as
-- its messages are imported); a no-op when present with the same content.
-- With ARGV[9] 'check' it only checks: the same answers, nothing written.
-- KEYS[1] session hash   KEYS[2] transcripts hash
-- ARGV[1] changes channel   ARGV[2] session id   ARGV[3] transcript id
-- ARGV[4] parent   ARGV[5] child   ARGV[6] ended_at (ns)   ARGV[7] end_reason
-- ARGV[8] created_at (ns)   ARGV[9] 'check' or 'write'
-- Returns {'ok'} (written), {'ok', 'present'} (there already) or
-- {'not_found'} (no session), {'conflict', field}.
local s = hgetall(KEYS[1])
if not s then return {'not_found'} end
local want = {id = ARGV[3], session = ARGV[2], parent = ARGV[4], child = ARGV[5],
  ended_at = ARGV[6], end_reason = ARGV[7], created_at = ARGV[8]}
local tr = getrec(KEYS[2], ARGV[3])
if tr then
  for k, v in pairs(want) do
    if tr[k] ~= v then return {'conflict', k} end
  end
  return {'ok', 'present'}
end
if ARGV[9] == 'check' then return {'ok'} end
local n = tonumber(s.tcount) + 1
want.message_count = 0
want.note_count = 0
want.n = n
putrec(KEYS[2], ARGV[3], want)
redis.call('HSET', KEYS[1], 'tcount', n)
publish(ARGV[1], ARGV[2])
return {'ok'}
