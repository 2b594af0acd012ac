-- The store's probe of TIME in scripts: a write that expires in 1 ms.
local now = redis.call('TIME')
redis.call('SET', KEYS[1], '1', 'PX', 1)
return 1
