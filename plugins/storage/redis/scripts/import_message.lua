-- import_message.lua: write an exported message at its seq; a no-op when the
-- same message is already there. With ARGV[7] 'check' it only checks,
-- nothing written: a message beyond the last one is taken ('check-first',
-- the first of its transcript in the import: only the next one).
-- KEYS[1] transcripts hash   KEYS[2] messages list
-- ARGV[1] changes channel   ARGV[2] session id   ARGV[3] transcript id
-- ARGV[4] seq   ARGV[5] role   ARGV[6] message JSON (without seq)
-- ARGV[7] 'write', 'check' or 'check-first'
-- Returns {'ok'} (written), {'ok', 'present'} (there already) or
-- {'not_found'} (no transcript), {'conflict'} (another
-- message at seq), {'gap', next seq} (seq beyond the next one).
local tr = getrec(KEYS[1], ARGV[3])
if not tr then return {'not_found'} end
local seq = tonumber(ARGV[4])
local n = redis.call('LLEN', KEYS[2])
if seq <= n then
  if redis.call('LINDEX', KEYS[2], seq - 1) ~= ARGV[6] then return {'conflict'} end
  return {'ok', 'present'}
end
if ARGV[7] == 'check' then return {'ok'} end
if seq ~= n + 1 then return {'gap', n + 1} end
if ARGV[7] == 'check-first' then return {'ok'} end
redis.call('RPUSH', KEYS[2], ARGV[6])
tr.message_count = tr.message_count + 1
if ARGV[5] == 'note' then tr.note_count = tr.note_count + 1 end
putrec(KEYS[1], ARGV[3], tr)
publish(ARGV[1], ARGV[2])
return {'ok'}
