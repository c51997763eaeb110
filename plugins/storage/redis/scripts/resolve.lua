-- resolve.lua: settle an unknown admission as completed or interrupted, or
-- put it back to queued at its seq (requeue).
-- KEYS[1] admissions hash   KEYS[2] queued zset   KEYS[3] unknown set
-- KEYS[4] payloads hash   KEYS[5] identity_lists hash
-- ARGV[1] changes channel   ARGV[2] session id   ARGV[3] admission id
-- ARGV[4] completed|interrupted|requeue   ARGV[5] now (ns)
-- Returns {'ok', record, payload, identity list} or {'not_found'}, {'conflict'} (not unknown).
local rec = getrec(KEYS[1], ARGV[3])
if not rec then return {'not_found'} end
if rec.status ~= 'unknown' then return {'conflict', rec.status} end
if ARGV[4] == 'requeue' then
  rec.status = 'queued'
  rec.mode = ''
  rec.delivered_to = ''
  rec.started_at = ''
  redis.call('ZADD', KEYS[2], rec.seq, ARGV[3])
else
  rec.status = 'done'
  rec.outcome = ARGV[4]
  rec.settled_at = ARGV[5]
end
redis.call('SREM', KEYS[3], ARGV[3])
local enc = putrec(KEYS[1], ARGV[3], rec)
publish(ARGV[1], ARGV[2])
return admreply(rec, enc, KEYS[4], KEYS[5])
