-- claim.lua: move the FIFO head from queued to running under (epoch,
-- generation+1), recording its mode and delivery target.
-- KEYS[1] session hash   KEYS[2] admissions hash   KEYS[3] queued zset
-- KEYS[4] running set    KEYS[5] unknown set
-- KEYS[6] payloads hash   KEYS[7] identity_lists hash   KEYS[8] grants hash
-- ARGV[1] changes channel   ARGV[2] session id   ARGV[3] admission id
-- ARGV[4] epoch   ARGV[5] mode   ARGV[6] delivered_to   ARGV[7] now (ns)
-- Returns {'ok', record, payload, identity list} or {'not_found'} (no session, or
-- no such admission in it), {'fenced'} (epoch not current), {'forbidden'}
-- (the lease's principal may no longer drain the session), {'busy'} (an
-- admission is running or unknown), {'not_head'}.
local s = hgetall(KEYS[1])
if not s then return {'not_found'} end
local epoch = tonumber(ARGV[4])
if tonumber(s.epoch) ~= epoch then return {'fenced'} end
if not permits(s, KEYS[8], s.lease_principal, 'drain') then return {'forbidden'} end
if busy(KEYS[4], KEYS[5]) then return {'busy'} end
if redis.call('HEXISTS', KEYS[2], ARGV[3]) == 0 then return {'not_found'} end
local head = redis.call('ZRANGE', KEYS[3], 0, 0)
if head[1] ~= ARGV[3] then return {'not_head'} end
local rec = getrec(KEYS[2], ARGV[3])
local gen = tonumber(s.generation) + 1
redis.call('HSET', KEYS[1], 'generation', gen)
rec.status = 'running'
rec.epoch = epoch
rec.generation = gen
rec.mode = ARGV[5]
rec.delivered_to = ARGV[6]
rec.started_at = ARGV[7]
local enc = putrec(KEYS[2], ARGV[3], rec)
redis.call('ZREM', KEYS[3], ARGV[3])
redis.call('SADD', KEYS[4], ARGV[3])
publish(ARGV[1], ARGV[2])
return admreply(rec, enc, KEYS[6], KEYS[7])
