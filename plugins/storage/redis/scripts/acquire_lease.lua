-- acquire_lease.lua: take the session's drain lease: epoch+1, expiry, and
-- every admission left running (by an older epoch) moves to unknown. The
-- principal must be allowed to drain the session (permits 'drain'); it is
-- kept as the lease's principal, which every claim checks again.
-- KEYS[1] session hash   KEYS[2] admissions hash   KEYS[3] running set
-- KEYS[4] unknown set    KEYS[5] grants hash
-- ARGV[1] changes channel   ARGV[2] session id   ARGV[3] holder
-- ARGV[4] expires_at (ns)   ARGV[5] now (ns)   ARGV[6] principal
-- Returns {'ok', epoch, recovered ids in seq order...} or {'not_found'},
-- {'forbidden'} (the principal may not drain the session), {'held', holder}
-- (another holder's lease is live).
local s = hgetall(KEYS[1])
if not s then return {'not_found'} end
if not permits(s, KEYS[5], ARGV[6], 'drain') then return {'forbidden'} end
if s.lease_holder ~= '' and s.lease_holder ~= ARGV[3] and ns_lt(ARGV[5], s.lease_expires_at) then
  return {'held', s.lease_holder}
end
local epoch = tonumber(s.epoch) + 1
redis.call('HSET', KEYS[1], 'epoch', epoch, 'lease_holder', ARGV[3], 'lease_expires_at', ARGV[4],
  'lease_principal', ARGV[6])
local recs = {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[3])) do
  local rec = getrec(KEYS[2], id)
  rec.status = 'unknown'
  putrec(KEYS[2], id, rec)
  redis.call('SREM', KEYS[3], id)
  redis.call('SADD', KEYS[4], id)
  recs[#recs + 1] = rec
end
table.sort(recs, function(a, b) return a.seq < b.seq end)
local out = {'ok', epoch}
for _, rec in ipairs(recs) do out[#out + 1] = rec.id end
publish(ARGV[1], ARGV[2])
return out
