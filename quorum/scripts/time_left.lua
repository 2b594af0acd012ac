-- How long until a time on the master's clock: at in ms (the expiry that
-- lock_release reports). Returns the ms left, negative once it passed (a
-- release that cannot decide asks it to know how long to keep asking,
-- quorum/confirm.go).
local at = ARGV[1]

return tonumber(at) - time_ms()
