-- settle.lua: end an admission (status done, outcome) and append its
-- messages (a turn's input and reply, or a note) in the same atomic step.
-- With direct the queued FIFO head is claimed and settled at once (notes,
-- misroutes), so a note can never be left running. Messages never change a
-- transcript's ended_at or end_reason.
-- KEYS[1] session hash   KEYS[2] admissions hash   KEYS[3] queued zset
-- KEYS[4] running set    KEYS[5] unknown set       KEYS[6] transcripts hash
-- KEYS[7] payloads hash  KEYS[8] identity_lists hash   KEYS[9] grants hash
-- KEYS[10..] one messages list per message, in message order
-- ARGV[1] changes channel   ARGV[2] session id   ARGV[3] admission id
-- ARGV[4] epoch   ARGV[5] generation   ARGV[6] direct '1'|'0'   ARGV[7] outcome
-- ARGV[8] mode ('' = keep)   ARGV[9] delivered_to ('' = keep)   ARGV[10] error
-- ARGV[11] now (ns)   ARGV[12] expected current transcript ('' = any)
-- ARGV[13..] per message: transcript, role, message JSON
-- Returns {'ok', record, payload, identity list} or {'not_found'} (session, admission),
-- {'no_transcript', id}, {'fenced'}, {'forbidden'} (direct: the lease's
-- principal may no longer drain the session), {'busy'}, {'not_head'},
-- {'moved', current}.
local s = hgetall(KEYS[1])
if not s then return {'not_found'} end
local id = ARGV[3]
local rec = getrec(KEYS[2], id)
if not rec then return {'not_found'} end
local epoch, gen = tonumber(ARGV[4]), tonumber(ARGV[5])
local direct = ARGV[6] == '1'
local now = ARGV[11]

if direct then
  if tonumber(s.epoch) ~= epoch then return {'fenced'} end
  if not permits(s, KEYS[9], s.lease_principal, 'drain') then return {'forbidden'} end
  if busy(KEYS[4], KEYS[5]) then return {'busy'} end
  local head = redis.call('ZRANGE', KEYS[3], 0, 0)
  if head[1] ~= id then return {'not_head'} end
else
  if rec.status ~= 'running' or rec.epoch ~= epoch or rec.generation ~= gen
    or tonumber(s.epoch) ~= epoch or tonumber(s.generation) ~= gen then
    return {'fenced'}
  end
end

if ARGV[12] ~= '' and s.current ~= ARGV[12] then return {'moved', s.current} end

-- Check every target transcript before writing anything.
local trs = {}
for i = 13, #ARGV, 3 do
  local t = ARGV[i]
  if not trs[t] then
    trs[t] = getrec(KEYS[6], t)
    if not trs[t] then return {'no_transcript', t} end
  end
end

if direct then
  gen = tonumber(s.generation) + 1
  redis.call('HSET', KEYS[1], 'generation', gen)
  redis.call('ZREM', KEYS[3], id)
  rec.epoch = epoch
  rec.generation = gen
  rec.started_at = now
else
  redis.call('SREM', KEYS[4], id)
end
rec.status = 'done'
rec.outcome = ARGV[7]
if ARGV[8] ~= '' then rec.mode = ARGV[8] end
if ARGV[9] ~= '' then rec.delivered_to = ARGV[9] end
if ARGV[10] ~= '' then rec.error = ARGV[10] end
rec.settled_at = now
local enc = putrec(KEYS[2], id, rec)

local k = 10
for i = 13, #ARGV, 3 do
  local t, role = ARGV[i], ARGV[i + 1]
  redis.call('RPUSH', KEYS[k], ARGV[i + 2])
  trs[t].message_count = trs[t].message_count + 1
  if role == 'note' then trs[t].note_count = trs[t].note_count + 1 end
  k = k + 1
end
for t, tr in pairs(trs) do putrec(KEYS[6], t, tr) end
publish(ARGV[1], ARGV[2])
return admreply(rec, enc, KEYS[7], KEYS[8])
