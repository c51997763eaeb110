-- cancel.lua: settle a queued admission as cancelled.
-- KEYS[1] admissions hash   KEYS[2] queued zset
-- KEYS[3] payloads hash   KEYS[4] identity_lists hash
-- ARGV[1] changes channel   ARGV[2] session id   ARGV[3] admission id   ARGV[4] now (ns)
-- Returns {'ok', record, payload, identity list} or {'not_found'}, {'conflict', status} (not queued).
local rec = getrec(KEYS[1], ARGV[3])
if not rec then return {'not_found'} end
if rec.status ~= 'queued' then return {'conflict', rec.status} end
rec.status = 'done'
rec.outcome = 'cancelled'
rec.settled_at = ARGV[4]
local enc = putrec(KEYS[1], ARGV[3], rec)
redis.call('ZREM', KEYS[2], ARGV[3])
publish(ARGV[1], ARGV[2])
return admreply(rec, enc, KEYS[3], KEYS[4])
