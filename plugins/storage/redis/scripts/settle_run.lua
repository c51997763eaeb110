-- settle_run.lua: settle a run of queued FIFO heads in order, each as
-- settle.lua with direct would (claimed and settled at once, its messages
-- appended), stopping at the first that fails; that one and those after it
-- are left untouched.
-- KEYS[1] session hash   KEYS[2] admissions hash   KEYS[3] queued zset
-- KEYS[4] running set    KEYS[5] unknown set       KEYS[6] transcripts hash
-- KEYS[7] payloads hash  KEYS[8] identity_lists hash   KEYS[9] viewers zset
-- KEYS[10] grants hash
-- KEYS[11..] the messages lists of the transcripts written
-- ARGV[1] changes channel   ARGV[2] session id   ARGV[3] wall-clock now (unix ms)
-- ARGV[4] number of requests, then per request: admission id, epoch,
--   outcome, mode, delivered_to, error, now (ns), unwatched '1'|'0',
--   expected current transcript ('' = any), number of messages, then per message: index of its list in KEYS,
--   transcript, role, message JSON
-- Returns {status, detail, record, payload, identity list, record, …}: status
-- 'ok' when every request was settled, else the first failure's code
-- ('not_found', 'no_transcript', 'fenced', 'forbidden' (the lease's
-- principal may no longer drain the session), 'busy', 'not_head',
-- 'watched', 'moved'),
-- followed by the settled admissions.
local s = hgetall(KEYS[1])
if not s then return {'not_found', ''} end
local out = {'ok', ''}
local trs = {}
local i = 5
local n = tonumber(ARGV[4])
local gen = tonumber(s.generation)
local epoch_now = tonumber(s.epoch)
-- Nothing this script writes starts a claim or a viewer, so whether the
-- session is busy and whether a viewer is live are read once for the run;
-- and nothing but the run itself leaves the queue, so the k-th request's
-- head is the k-th queued admission as read here. The writes are gathered
-- and made once per key at the end (one ZREM, one HSET, one RPUSH per
-- messages list), in the order the requests came.
local is_busy = busy(KEYS[4], KEYS[5])
local may_drain = permits(s, KEYS[10], s.lease_principal, 'drain')
local viewers = redis.call('ZCOUNT', KEYS[9], '(' .. ARGV[3], '+inf') > 0
local heads = redis.call('ZRANGE', KEYS[3], 0, n - 1)
local done_ids, encs, lists = {}, {}, {}
for k = 1, n do
  local id, epoch = ARGV[i], tonumber(ARGV[i + 1])
  local outcome, mode, delivered, err, now = ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6]
  local unwatched, expect, nmsg = ARGV[i + 7] == '1', ARGV[i + 8], tonumber(ARGV[i + 9])
  local m0 = i + 10
  i = m0 + 4 * nmsg
  local rec = getrec(KEYS[2], id)
  if not rec then out[1], out[2] = 'not_found', id break end
  if epoch_now ~= epoch then out[1], out[2] = 'fenced', id break end
  if not may_drain then out[1], out[2] = 'forbidden', id break end
  if is_busy then out[1], out[2] = 'busy', id break end
  if heads[k] ~= id then out[1], out[2] = 'not_head', id break end
  if expect ~= '' and s.current ~= expect then out[1], out[2] = 'moved', id break end
  if unwatched and viewers then
    local tr = getrec(KEYS[6], delivered)
    if tr and tr.ended_at == '' then
      out[1], out[2] = 'watched', id
      break
    end
  end
  local missing = nil
  for j = m0, i - 1, 4 do
    local t = ARGV[j + 1]
    if not trs[t] then
      trs[t] = getrec(KEYS[6], t)
      if not trs[t] then missing = t break end
    end
  end
  if missing then out[1], out[2] = 'no_transcript', missing break end

  gen = gen + 1
  rec.epoch = epoch
  rec.generation = gen
  rec.started_at = now
  rec.status = 'done'
  rec.outcome = outcome
  if mode ~= '' then rec.mode = mode end
  if delivered ~= '' then rec.delivered_to = delivered end
  if err ~= '' then rec.error = err end
  rec.settled_at = now
  local enc = cjson.encode(rec)
  done_ids[#done_ids + 1] = id
  encs[#encs + 1] = enc
  for j = m0, i - 1, 4 do
    local t, role, at = ARGV[j + 1], ARGV[j + 2], tonumber(ARGV[j])
    local l = lists[at]
    if not l then
      l = {}
      lists[at] = l
    end
    l[#l + 1] = ARGV[j + 3]
    trs[t].message_count = trs[t].message_count + 1
    if role == 'note' then trs[t].note_count = trs[t].note_count + 1 end
  end
end
if #done_ids > 0 then
  local recs = {}
  for k, id in ipairs(done_ids) do
    recs[2 * k - 1] = id
    recs[2 * k] = encs[k]
  end
  redis.call('ZREM', KEYS[3], unpack(done_ids))
  redis.call('HSET', KEYS[2], unpack(recs))
  for at, l in pairs(lists) do redis.call('RPUSH', KEYS[at], unpack(l)) end
  redis.call('HSET', KEYS[1], 'generation', gen)
  for t, tr in pairs(trs) do putrec(KEYS[6], t, tr) end
  -- Each settled admission's reply: its record, payload and identity list.
  local payloads = redis.call('HMGET', KEYS[7], unpack(done_ids))
  local idlists = redis.call('HMGET', KEYS[8], unpack(done_ids))
  for k, enc in ipairs(encs) do
    out[#out + 1] = enc
    out[#out + 1] = payloads[k] or ''
    out[#out + 1] = idlists[k] or ''
  end
  publish(ARGV[1], ARGV[2])
end
return out
