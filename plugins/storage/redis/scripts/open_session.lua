-- open_session.lua: create a session and its first transcript (named as the
-- session), or leave an existing session unchanged.
-- KEYS[1] session hash       KEYS[2] transcripts hash
-- ARGV[1] changes channel    ARGV[2] session id   ARGV[3] owner   ARGV[4] now (ns)
-- Returns {'created'} or {'exists'}.
local sid = ARGV[2]
if redis.call('EXISTS', KEYS[1]) == 1 then return {'exists'} end
redis.call('HSET', KEYS[1], 'id', sid, 'owner', ARGV[3], 'current', sid, 'epoch', 0,
  'generation', 0, 'next_seq', 1, 'created_at', ARGV[4], 'lease_holder', '',
  'lease_expires_at', '', 'tcount', 1)
if redis.call('HEXISTS', KEYS[2], sid) == 0 then
  putrec(KEYS[2], sid, {id = sid, session = sid, parent = '', child = '', ended_at = '',
    end_reason = '', message_count = 0, note_count = 0, created_at = ARGV[4], n = 1})
end
publish(ARGV[1], sid)
return {'created'}
