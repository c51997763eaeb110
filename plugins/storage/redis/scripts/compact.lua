-- compact.lua: turn the session's done admissions settled before a time
-- into tombstones (docs/contract.md §8): each keeps its record and identity
-- list, and its payload is replaced by the tombstone marker and the
-- payload's SHA-1; the identity, request-id and id lookups are left as they
-- are, so a re-offer still resolves to the tombstone. It examines only the
-- admissions after a seq, at most a given number of them, so a compaction
-- in batches passes over the session once and each call's work is bounded.
-- KEYS[1] session hash   KEYS[2] admissions hash   KEYS[3] payloads hash
-- KEYS[4] seqs zset
-- ARGV[1] changes channel   ARGV[2] session id   ARGV[3] before (ns)
-- ARGV[4] limit (0: none)   ARGV[5] after (seq)   ARGV[6] scan (0: none)
-- Returns {'ok', next seq (0: the end reached), compacted ids…} or
-- {'not_found'} (no session).
if redis.call('EXISTS', KEYS[1]) == 0 then return {'not_found'} end
local limit, scan = tonumber(ARGV[4]), tonumber(ARGV[6])
local range
if scan > 0 then
  range = redis.call('ZRANGEBYSCORE', KEYS[4], '(' .. ARGV[5], '+inf', 'WITHSCORES', 'LIMIT', 0, scan + 1)
else
  range = redis.call('ZRANGEBYSCORE', KEYS[4], '(' .. ARGV[5], '+inf', 'WITHSCORES')
end
local out = {'ok', 0}
if #range == 0 then return out end
-- The records of the range are read in one call (a payload, which may be
-- large, only for an admission to compact), and the tombstones written in
-- one call at the end: fewer commands for the server to run, and to
-- append to its append-only file.
local ids = {}
for i = 1, #range, 2 do ids[#ids + 1] = range[i] end
local recs = many('HMGET', KEYS[2], ids)
local tombs = {}
local scanned, last = 0, '0'
for j, id in ipairs(ids) do
  if (limit > 0 and #out - 2 >= limit) or (scan > 0 and scanned >= scan) then
    out[2] = last
    break
  end
  scanned, last = scanned + 1, range[2 * j]
  local rec = recs[j] and cjson.decode(recs[j])
  if rec and rec.status == 'done' and ns_lt(rec.settled_at, ARGV[3]) then
    local payload = redis.call('HGET', KEYS[3], id)
    if payload and string.sub(payload, 1, #tombstone_marker) ~= tombstone_marker then
      tombs[#tombs + 1] = id
      tombs[#tombs + 1] = tombstone_marker .. redis.sha1hex(payload)
      out[#out + 1] = id
    end
  end
end
many('HSET', KEYS[3], tombs)
if #out > 2 then publish(ARGV[1], ARGV[2]) end
return out
