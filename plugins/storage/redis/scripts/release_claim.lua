-- release_claim.lua: drop a transcript id claim this store just wrote, when
-- the script that was to create the transcript refused (nothing else may
-- have claimed it since: the value carries the claim's time).
-- KEYS[1] transcript owner key
-- ARGV[1] the claim's value ("<session> <claimed at, ns>")
-- Returns {'ok'} (dropped, or no longer ours: left alone).
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return {'ok'}
