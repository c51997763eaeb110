-- steps.lua: the drain steps that more than one script runs, each defined
-- once as a function of (keys, argv): the KEYS and ARGV of the script named
-- after it, whose header documents them and the reply the function returns.
-- Prepended after common.lua to the scripts that call them (scripts.go):
-- settle.lua and claim.lua run one step, settle_claim.lua runs both.

-- settle is settle.lua: end an admission and append its messages.
local function settle(keys, argv)
  local s = hgetall(keys[1])
  if not s then return {'not_found'} end
  local id = argv[3]
  local rec = getrec(keys[2], id)
  if not rec then return {'not_found'} end
  local epoch, gen = tonumber(argv[4]), tonumber(argv[5])
  local direct = argv[6] == '1'
  local now = argv[11]

  if direct then
    if tonumber(s.epoch) ~= epoch then return {'fenced'} end
    if not permits(s, keys[9], s.lease_principal, 'drain') then return {'forbidden'} end
    if busy(keys[4], keys[5]) then return {'busy'} end
    local head = redis.call('ZRANGE', keys[3], 0, 0)
    if head[1] ~= id then return {'not_head'} end
  else
    if rec.status ~= 'running' or rec.epoch ~= epoch or rec.generation ~= gen
      or tonumber(s.epoch) ~= epoch or tonumber(s.generation) ~= gen then
      return {'fenced'}
    end
  end

  if argv[12] ~= '' and s.current ~= argv[12] then return {'moved', s.current} end

  -- Check every target transcript before writing anything.
  local trs = {}
  for i = 13, #argv, 3 do
    local t = argv[i]
    if not trs[t] then
      trs[t] = getrec(keys[6], t)
      if not trs[t] then return {'no_transcript', t} end
    end
  end

  if direct then
    gen = tonumber(s.generation) + 1
    redis.call('HSET', keys[1], 'generation', gen)
    redis.call('ZREM', keys[3], id)
    rec.epoch = epoch
    rec.generation = gen
    rec.started_at = now
  else
    redis.call('SREM', keys[4], id)
  end
  rec.status = 'done'
  rec.outcome = argv[7]
  if argv[8] ~= '' then rec.mode = argv[8] end
  if argv[9] ~= '' then rec.delivered_to = argv[9] end
  if argv[10] ~= '' then rec.error = argv[10] end
  rec.settled_at = now
  local enc = putrec(keys[2], id, rec)

  local k = 10
  for i = 13, #argv, 3 do
    local t, role = argv[i], argv[i + 1]
    redis.call('RPUSH', keys[k], argv[i + 2])
    trs[t].message_count = trs[t].message_count + 1
    if role == 'note' then trs[t].note_count = trs[t].note_count + 1 end
    k = k + 1
  end
  for t, tr in pairs(trs) do putrec(keys[6], t, tr) end
  publish(argv[1], argv[2])
  return admreply(rec, enc, keys[7], keys[8])
end

-- claim is claim.lua: move the FIFO head from queued to running.
local function claim(keys, argv)
  local s = hgetall(keys[1])
  if not s then return {'not_found'} end
  local epoch = tonumber(argv[4])
  if tonumber(s.epoch) ~= epoch then return {'fenced'} end
  if not permits(s, keys[8], s.lease_principal, 'drain') then return {'forbidden'} end
  if busy(keys[4], keys[5]) then return {'busy'} end
  if redis.call('HEXISTS', keys[2], argv[3]) == 0 then return {'not_found'} end
  local head = redis.call('ZRANGE', keys[3], 0, 0)
  if head[1] ~= argv[3] then return {'not_head'} end
  local rec = getrec(keys[2], argv[3])
  local gen = tonumber(s.generation) + 1
  redis.call('HSET', keys[1], 'generation', gen)
  rec.status = 'running'
  rec.epoch = epoch
  rec.generation = gen
  rec.mode = argv[5]
  rec.delivered_to = argv[6]
  rec.started_at = argv[7]
  local enc = putrec(keys[2], argv[3], rec)
  redis.call('ZREM', keys[3], argv[3])
  redis.call('SADD', keys[4], argv[3])
  publish(argv[1], argv[2])
  return admreply(rec, enc, keys[6], keys[7])
end
