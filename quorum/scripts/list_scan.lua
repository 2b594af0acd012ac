-- One page of this master's keys for RLOCKLIST (quorum/doc.go, "Listing"):
-- cursor the master's SCAN cursor, count SCAN's COUNT hint, meta the
-- proxy's meta prefix. Returns {next cursor, key...}: the keys under meta,
-- and the string keys outside it (a lock key is a string; the masters may
-- keep other data beside the locks).
local cursor, count, meta = ARGV[1], ARGV[2], ARGV[3]

local page = redis.call('SCAN', cursor, 'COUNT', count)
local out = {page[1]}
for _, k in ipairs(page[2]) do
  if string.sub(k, 1, #meta) == meta or redis.call('TYPE', k)['ok'] == 'string' then
    out[#out + 1] = k
  end
end
return out
