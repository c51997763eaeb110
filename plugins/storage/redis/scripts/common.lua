-- common.lua: helpers prepended to every script of this directory.
-- Times are unix nanoseconds as decimal strings ("" = none), compared
-- exactly as integers written out (ns_lt), never read from Redis TIME.
local function hgetall(key)
  local flat = redis.call('HGETALL', key)
  if #flat == 0 then return nil end
  local t = {}
  for i = 1, #flat, 2 do t[flat[i]] = flat[i + 1] end
  return t
end

-- ns_lt: a < b for two times in unix nanoseconds as decimal strings, "" the
-- least. Compared as signed integers by sign, length and digits, never as
-- Lua numbers (doubles, which lose nanoseconds past 2^53): before 1970 a
-- time is negative, and among negatives the longer is the smaller.
local function ns_lt(a, b)
  if a == b then return false end
  if a == '' then return true end
  if b == '' then return false end
  local na, nb = string.sub(a, 1, 1) == '-', string.sub(b, 1, 1) == '-'
  if na ~= nb then return na end
  if na then a, b = string.sub(b, 2), string.sub(a, 2) end
  if #a ~= #b then return #a < #b end
  return a < b
end

-- many calls cmd on key with the flat argument list t, in slices short
-- enough for unpack, and returns the elements of its replies that are
-- lists (HMGET's), in order.
local function many(cmd, key, t)
  local out = {}
  for j = 1, #t, 1000 do
    local r = redis.call(cmd, key, unpack(t, j, math.min(j + 999, #t)))
    if type(r) == 'table' then
      for _, v in ipairs(r) do out[#out + 1] = v end
    end
  end
  return out
end

local function getrec(key, field)
  local v = redis.call('HGET', key, field)
  if not v then return nil end
  return cjson.decode(v)
end

-- putrec writes rec and returns it as written.
local function putrec(key, field, rec)
  local enc = cjson.encode(rec)
  redis.call('HSET', key, field, enc)
  return enc
end

-- permits is backend.Permits (pkg/backend/access.go), the one rule of who
-- may do what on a session: s is the session hash, grants_key the
-- session's grants hash (principal -> {"role","producers"}), act one of
-- 'inspect', 'admit' (human), 'admit automation' (of producer),
-- 'operate', 'drain'.
local grant_roles = {reader = true, drainer = true, writer = true, owner = true}

local function permits(s, grants_key, principal, act, producer)
  if principal == nil or principal == '' then return false end
  if s.owner == principal then return true end
  local raw = redis.call('HGET', grants_key, principal)
  if not raw then return false end
  local g = cjson.decode(raw)
  local role = g.role
  if not grant_roles[role] then return false end
  if act == 'inspect' then return true end
  if act == 'admit' then return role == 'writer' or role == 'owner' end
  if act == 'admit automation' then
    if role == 'owner' then return true end
    if role ~= 'writer' or type(g.producers) ~= 'table' then return false end
    for _, p in ipairs(g.producers) do
      if p == producer then return true end
    end
    return false
  end
  if act == 'operate' then return role == 'owner' end
  if act == 'drain' then return role == 'owner' or role == 'drainer' end
  return false
end

local function busy(running_key, unknown_key)
  return redis.call('SCARD', running_key) + redis.call('SCARD', unknown_key) > 0
end

local function publish(channel, session)
  redis.call('PUBLISH', channel, session)
end

-- admreply is the {'ok', record, payload, identity list} reply of the
-- scripts that change one admission; enc is the record as putrec wrote it.
local function admreply(rec, enc, payloads_key, identity_lists_key)
  return {'ok', enc, redis.call('HGET', payloads_key, rec.id) or '',
    redis.call('HGET', identity_lists_key, rec.id) or ''}
end


-- A tombstone (compact.lua) keeps, in the payloads hash, the marker
-- "\0sha1:" and the SHA-1 of the payload it dropped (records.go,
-- tombstoneMarker). same_payload compares an offered payload with what an
-- admission committed: byte for byte, or by digest for a tombstone.
local tombstone_marker = '\0sha1:'

local function same_payload(stored, offered)
  if stored and string.sub(stored, 1, #tombstone_marker) == tombstone_marker then
    return string.sub(stored, #tombstone_marker + 1) == redis.sha1hex(offered)
  end
  return stored == offered
end
