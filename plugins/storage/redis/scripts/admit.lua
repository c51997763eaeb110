-- admit.lua: commit admission requests to one session (docs/contract.md §2), each
-- resolving its request id or identities against the session; all of them
-- in one atomic step, each with its own result.
-- KEYS[1] session hash       KEYS[2] grants hash       KEYS[3] transcripts hash
-- KEYS[4] admissions hash    KEYS[5] payloads hash     KEYS[6] identity_lists hash
-- KEYS[7] seqs zset          KEYS[8] queued zset       KEYS[9] identities hash
-- KEYS[10] requests hash
-- KEYS[11..] with a claim (ARGV[3]) only: per request, its admission id's
--   lookup, then the identity lookup of each of its identities
-- ARGV[1] changes channel    ARGV[2] session id
-- ARGV[3] claim: '' when the caller wrote the global lookups before (the
--   two steps a Cluster needs); else every key is on this server, and the
--   script writes them first, as the caller would have: each admission id's
--   lookup set to the claim ("<session id> <ns>") unless held, each identity
--   lookup given the session
-- ARGV[4..] one block per request: new admission id, kind, producer,
--   principal, request id, canonical payload, pinned target ('' = current),
--   replay_of, create session '1'|'0', reopen '1'|'0', now (ns),
--   number of identities n, then the n identities, then the number of
--   parts (0 or n), then per part (for the identity at the same place): its
--   member of a composed payload ({"identity":…,"payload":…}), its text as
--   escaped between a JSON string's quotes, and its canonical payload
-- Returns one reply per request:
--   {'ok', result, record, payload, identity list, payload_differs '1'|'0',
--    duplicate ids joined by NUL, per-identity results ('a'|'d' per identity)}
--   for a duplicate (the record, payload and identities held), and for a new
--   admission, which the caller builds from its request (records.go,
--   newAdmission) instead of decoding the record just written:
--   {'ok', result, '', composed payload ('' = the request's own), identity
--    list, payload_differs, duplicate ids, per-identity results, seq,
--    pinned target}
--   result: admitted | duplicate | coalesced; with parts, payload_differs is
--   '0' and judged per member by the caller (the payloads are immutable)
-- or {'not_found'} (no session), {'forbidden'} (no grant lets the principal admit this),
-- {'conflict', admission id} (request id reused with another payload),
-- {'id_taken', admission id} (the new admission id names another request),
-- {'closed', current transcript}.
-- With a claim, {'held'} alone when an admission id's lookup is held by
-- another session: nothing is admitted, and the caller takes the two steps.
local sid = ARGV[2]
local changed = false

-- The writes of new admissions (their records, payloads, identity lists,
-- identities, and both sorted sets) are gathered here and made at the end,
-- one call per key for all the requests, instead of six calls for each.
-- Every read of those keys goes through hget, so a request sees the ones
-- before it in this script exactly as if they were written already.
local pend = {[4] = {}, [5] = {}, [6] = {}, [9] = {}}
local flat = {[4] = {}, [5] = {}, [6] = {}, [9] = {}}
local zflat = {}
local function hget(k, field)
  local v = pend[k][field]
  if v then return v end
  return redis.call('HGET', KEYS[k], field)
end
local function hset(k, field, v)
  pend[k][field] = v
  local t = flat[k]
  t[#t + 1] = field
  t[#t + 1] = v
end
-- The session hash is read once for all the requests; next_seq is counted
-- here and written once at the end.
local S = hgetall(KEYS[1])
local seq_dirty = false

local function admit_one(id, kind, producer, principal, request_id, payload, pinned, replay_of,
    create, reopen, now, idents, parts)

  local function reply(result, adm_id, differs, dups, idres)
    return {'ok', result, hget(4, adm_id), hget(5, adm_id),
      hget(6, adm_id) or '', differs and '1' or '0', table.concat(dups, '\0'), idres}
  end

  -- A request re-sent after its reply was lost (same id, kind, principal
  -- and payload) finds its own admission, as a duplicate; any other use of
  -- a taken id is refused.
  local held = hget(4, id)
  if held then
    local old = cjson.decode(held)
    if old.kind ~= kind or old.principal ~= principal or not same_payload(hget(5, id), payload) then
      return {'id_taken', id}
    end
    return reply('duplicate', id, false, {id}, string.rep('d', #idents))
  end

  local s = S
  if not s then
    if kind ~= 'human' or not create then return {'not_found'} end
    redis.call('HSET', KEYS[1], 'id', sid, 'owner', principal, 'current', sid, 'epoch', 0,
      'generation', 0, 'next_seq', 1, 'created_at', now, 'lease_holder', '', 'lease_expires_at', '',
      'tcount', 1)
    changed = true
    if redis.call('HEXISTS', KEYS[3], sid) == 0 then
      putrec(KEYS[3], sid, {id = sid, session = sid, parent = '', child = '', ended_at = '',
        end_reason = '', message_count = 0, note_count = 0, created_at = now, n = 1})
    end
    S = hgetall(KEYS[1])
    s = S
  end

  if not permits(s, KEYS[2], principal, kind == 'human' and 'admit' or 'admit automation', producer) then
    return {'forbidden'}
  end

  local new_ids = {}
  local new_parts = {}
  local dups = {}
  local idres = {}
  local differs = false

  if kind == 'human' then
    local rkey = principal .. '\0' .. request_id
    if request_id ~= '' then
      local existing = redis.call('HGET', KEYS[10], rkey)
      if existing then
        if not same_payload(hget(5, existing), payload) then return {'conflict', existing} end
        return reply('duplicate', existing, false, {existing}, '')
      end
    end
    local cur = getrec(KEYS[3], s.current)
    if cur and cur.ended_at ~= '' then
      if not reopen then return {'closed', s.current} end
      cur.ended_at = ''
      cur.end_reason = ''
      putrec(KEYS[3], s.current, cur)
    end
    if request_id ~= '' then redis.call('HSET', KEYS[10], rkey, id) end
  else
    local seen = {}
    local first_dup = nil
    for k, ident in ipairs(idents) do
      local holder = hget(9, ident)
      if holder then
        idres[#idres + 1] = 'd'
        if not seen[holder] then
          seen[holder] = true
          dups[#dups + 1] = holder
          if not parts and not same_payload(hget(5, holder), payload) then differs = true end
        end
        first_dup = first_dup or holder
      elseif seen['\0' .. ident] then
        idres[#idres + 1] = 'a'
      else
        seen['\0' .. ident] = true
        idres[#idres + 1] = 'a'
        new_ids[#new_ids + 1] = ident
        if parts then new_parts[#new_parts + 1] = parts[k] end
      end
    end
    if #new_ids == 0 then
      return reply('duplicate', first_dup, differs, dups, table.concat(idres))
    end
    for _, ident in ipairs(new_ids) do hset(9, ident, id) end
    if pinned == '' then pinned = s.current end
    if parts then
      -- The admission is made of the parts of the identities not yet held
      -- (backend.ComposeParts, byte for byte).
      if #new_parts == 1 then
        payload = new_parts[1].payload
      else
        local members, texts = {}, {}
        for j, p in ipairs(new_parts) do
          members[j] = p.member
          texts[j] = p.text
        end
        payload = '{"parts":[' .. table.concat(members, ',') .. '],"text":"' ..
          table.concat(texts, '\\n') .. '"}'
      end
    end
  end

  local seq = tonumber(s.next_seq)
  s.next_seq = seq + 1
  seq_dirty = true
  local rec = {id = id, session = sid, seq = seq, kind = kind, producer = producer,
    principal = principal, request_id = request_id, pinned_target = pinned, delivered_to = '',
    status = 'queued', outcome = '', mode = '', epoch = 0, generation = 0, admitted_at = now,
    started_at = '', settled_at = '', replay_of = replay_of, error = ''}
  local enc = cjson.encode(rec)
  hset(4, id, enc)
  hset(5, id, payload)
  local idlist = ''
  if #new_ids > 0 then
    idlist = table.concat(new_ids, '\0')
    hset(6, id, idlist)
  end
  zflat[#zflat + 1] = seq
  zflat[#zflat + 1] = id
  changed = true
  local result = 'admitted'
  if #new_ids > 1 then result = 'coalesced' end
  -- The reply carries what the caller cannot know: the seq, the pinned
  -- target and a composed payload.
  return {'ok', result, '', parts and payload or '', idlist, differs and '1' or '0', table.concat(dups, '\0'),
    table.concat(idres), seq, pinned}
end

local reqs = {}
local i = 4
while i <= #ARGV do
  local n = tonumber(ARGV[i + 11])
  local idents = {}
  for j = 1, n do idents[j] = ARGV[i + 11 + j] end
  local at = i + 12 + n
  local np = tonumber(ARGV[at])
  local parts = nil
  if np > 0 then
    parts = {}
    for j = 1, np do
      local k = at + 3 * (j - 1)
      parts[j] = {member = ARGV[k + 1], text = ARGV[k + 2], payload = ARGV[k + 3]}
    end
  end
  reqs[#reqs + 1] = {i = i, idents = idents, parts = parts}
  i = at + 1 + 3 * np
end

local claim = ARGV[3]
if claim ~= '' then
  local k, mine = 11, sid .. ' '
  for _, r in ipairs(reqs) do
    if not redis.call('SET', KEYS[k], claim, 'NX') then
      local held = redis.call('GET', KEYS[k])
      if held and string.sub(held, 1, #mine) ~= mine then return {'held'} end
    end
    k = k + 1
    for _ = 1, #r.idents do
      redis.call('SADD', KEYS[k], sid)
      k = k + 1
    end
  end
end

local out = {}
for _, r in ipairs(reqs) do
  local i = r.i
  out[#out + 1] = admit_one(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5],
    ARGV[i + 6], ARGV[i + 7], ARGV[i + 8] == '1', ARGV[i + 9] == '1', ARGV[i + 10], r.idents, r.parts)
end
for _, k in ipairs({4, 5, 6, 9}) do many('HSET', KEYS[k], flat[k]) end
many('ZADD', KEYS[7], zflat)
many('ZADD', KEYS[8], zflat)
if seq_dirty then redis.call('HSET', KEYS[1], 'next_seq', S.next_seq) end
if changed then publish(ARGV[1], sid) end
return out
