-- close_session.lua: end the session's current transcript with a reason,
-- only when the session is idle (no queued, running or unknown admission).
-- KEYS[1] session hash   KEYS[2] queued zset   KEYS[3] running set
-- KEYS[4] unknown set    KEYS[5] transcripts hash
-- ARGV[1] changes channel   ARGV[2] session id   ARGV[3] reason   ARGV[4] now (ns)
-- Returns {'ok', transcript record} or {'not_found'}, {'closed'}, {'busy'}.
local s = hgetall(KEYS[1])
if not s then return {'not_found'} end
local tr = getrec(KEYS[5], s.current)
if tr.ended_at ~= '' then return {'closed'} end
if redis.call('ZCARD', KEYS[2]) > 0 or busy(KEYS[3], KEYS[4]) then return {'busy'} end
tr.ended_at = ARGV[4]
tr.end_reason = ARGV[3]
putrec(KEYS[5], s.current, tr)
publish(ARGV[1], ARGV[2])
return {'ok', cjson.encode(tr)}
