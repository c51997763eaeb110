-- swap_lookup.lua: take a global lookup key (transcript id or admission id
-- owner) over from an orphan, only if it still holds the value the caller
-- read and judged orphaned: a compare-and-set on one key, so two takers
-- racing for one orphan cannot both win (and it runs on any Cluster slot).
-- KEYS[1] lookup key
-- ARGV[1] the value read ('' = absent)   ARGV[2] the new value
-- Returns {'ok'} when set, {'changed', current value} otherwise.
local cur = redis.call('GET', KEYS[1]) or ''
if cur ~= ARGV[1] then return {'changed', cur} end
redis.call('SET', KEYS[1], ARGV[2])
return {'ok'}
