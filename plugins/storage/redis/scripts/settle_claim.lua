-- settle_claim.lua: settle a claimed admission (settle.lua) and, once it
-- is settled, claim the next head (claim.lua), in one atomic step: the
-- functions settle and claim of steps.lua, each on its own KEYS and ARGV.
-- ARGV[1] n: KEYS[1..n] are settle.lua's keys, KEYS[n+1..] claim.lua's
-- ARGV[2] m: ARGV[3..m+2] are settle.lua's arguments, ARGV[m+3..] claim.lua's
-- Returns settle.lua's reply when the settle failed (nothing written);
-- else its four elements {'ok', record, payload, identity list} followed
-- by claim.lua's reply.
local n, m = tonumber(ARGV[1]), tonumber(ARGV[2])
local skeys, ckeys, sargs, cargs = {}, {}, {}, {}
for i = 1, #KEYS do
  if i <= n then skeys[#skeys + 1] = KEYS[i] else ckeys[#ckeys + 1] = KEYS[i] end
end
for i = 3, #ARGV do
  if i <= m + 2 then sargs[#sargs + 1] = ARGV[i] else cargs[#cargs + 1] = ARGV[i] end
end
local settled = settle(skeys, sargs)
if settled[1] ~= 'ok' then return settled end
local claimed = claim(ckeys, cargs)
for i = 1, #claimed do settled[#settled + 1] = claimed[i] end
return settled
