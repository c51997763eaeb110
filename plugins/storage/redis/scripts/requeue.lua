-- requeue.lua: put a running admission back to queued at its seq without
-- spending anything (a deferral). Fenced like settle.
-- KEYS[1] session hash   KEYS[2] admissions hash   KEYS[3] queued zset
-- KEYS[4] running set
-- KEYS[5] payloads hash   KEYS[6] identity_lists hash
-- ARGV[1] changes channel   ARGV[2] session id   ARGV[3] admission id
-- ARGV[4] epoch   ARGV[5] generation
-- Returns {'ok', record, payload, identity list} or {'not_found'}, {'fenced'}.
local s = hgetall(KEYS[1])
if not s then return {'not_found'} end
local rec = getrec(KEYS[2], ARGV[3])
if not rec then return {'not_found'} end
local epoch, gen = tonumber(ARGV[4]), tonumber(ARGV[5])
if rec.status ~= 'running' or rec.epoch ~= epoch or rec.generation ~= gen
  or tonumber(s.epoch) ~= epoch or tonumber(s.generation) ~= gen then
  return {'fenced'}
end
rec.status = 'queued'
rec.mode = ''
rec.delivered_to = ''
rec.started_at = ''
local enc = putrec(KEYS[2], ARGV[3], rec)
redis.call('SREM', KEYS[4], ARGV[3])
redis.call('ZADD', KEYS[3], rec.seq, ARGV[3])
publish(ARGV[1], ARGV[2])
return admreply(rec, enc, KEYS[5], KEYS[6])
