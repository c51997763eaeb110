-- compact.lua: turn the session's done admissions settled before a time
-- into tombstones (docs/contract.md §8): each keeps its record and identity
-- list, and its payload is replaced by the tombstone marker and the
-- payload's SHA-1; the identity, request-id and id lookups are left as they
-- are, so a re-offer still resolves to the tombstone.
-- KEYS[1] session hash   KEYS[2] admissions hash   KEYS[3] payloads hash
-- KEYS[4] seqs zset
-- ARGV[1] changes channel   ARGV[2] session id   ARGV[3] before (ns)
-- ARGV[4] limit (0: none)
-- Returns {'ok', compacted ids…} or {'not_found'} (no session).
if redis.call('EXISTS', KEYS[1]) == 0 then return {'not_found'} end
local limit = tonumber(ARGV[4])
local out = {'ok'}
for _, id in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
  if limit > 0 and #out - 1 >= limit then break end
  local rec = getrec(KEYS[2], id)
  local payload = redis.call('HGET', KEYS[3], id)
  if rec and rec.status == 'done' and payload and ns_lt(rec.settled_at, ARGV[3]) and
      string.sub(payload, 1, #tombstone_marker) ~= tombstone_marker then
    redis.call('HSET', KEYS[3], id, tombstone_marker .. redis.sha1hex(payload))
    out[#out + 1] = id
  end
end
if #out > 1 then publish(ARGV[1], ARGV[2]) end
return out
