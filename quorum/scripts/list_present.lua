-- Which of keys this master has, for RLOCKLIST's one-listing rule
-- (quorum/doc.go, "Listing locks"). Returns {1 or 0 per key}.
local keys = 0

local out = {}
for i = 1, #KEYS - keys do
  out[i] = redis.call('EXISTS', KEYS[keys + i])
end
return out
