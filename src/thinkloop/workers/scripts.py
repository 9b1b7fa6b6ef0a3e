"""The fleet's Lua scripts in Redis (see :mod:`thinkloop.workers.bus`): each is one round
trip where the commands it runs would be several, and atomic where that matters."""

# Take a slot for a run: refused (0) over the user's or the fleet's limit.
RESERVE = """
if redis.call('SCARD', KEYS[2]) >= tonumber(ARGV[2]) then return -1 end
if redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[3]) then return -2 end
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('SADD', KEYS[2], ARGV[1])
return 1
"""
# Take a slot and write the run's row in one round trip (the submit path): KEYS active,
# active:user, run:id; ARGV run id, per-user limit, fleet limit, row TTL, then field pairs.
CREATE = """
if redis.call('SCARD', KEYS[2]) >= tonumber(ARGV[2]) then return -1 end
if redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[3]) then return -2 end
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[3], unpack(ARGV, 5))
redis.call('EXPIRE', KEYS[3], tonumber(ARGV[4]))
return 1
"""
# arq's enqueue (job key + queue entry) in one round trip instead of WATCH/EXISTS/MULTI:
# queued once per id, and the workers woken (rather than waiting for their next poll),
# unless they were woken in the last ARGV[7] ms (a worker takes what is queued then with
# the run of that wake-up: it waits longer than that before it takes). KEYS job key, result
# key, queue, the last wake-up's key; ARGV job, TTL ms, score, id, the control channel, the
# wake-up message, ms between wake-ups.
ENQUEUE = """
if redis.call('EXISTS', KEYS[1], KEYS[2]) > 0 then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', tonumber(ARGV[2]))
redis.call('ZADD', KEYS[3], tonumber(ARGV[3]), ARGV[4])
if redis.call('SET', KEYS[4], '1', 'PX', tonumber(ARGV[7]), 'NX') then
  redis.call('PUBLISH', ARGV[5], ARGV[6])
end
return 1
"""
# CREATE and ENQUEUE for the runs a gateway queues together, in order (each sees the slots
# the runs before it took), one round trip for all. CREATE_MANY: KEYS active, then active:user
# and run:id for each run; ARGV per-user limit, fleet limit, row TTL, then for each run its
# id, its field count and its field pairs. 1, -1 or -2 per run, as CREATE.
CREATE_MANY = """
local out, a = {}, 4
for i = 1, (#KEYS - 1) / 2 do
  local users, run = KEYS[2 * i], KEYS[2 * i + 1]
  local id, n = ARGV[a], tonumber(ARGV[a + 1])
  if redis.call('SCARD', users) >= tonumber(ARGV[1]) then out[i] = -1
  elseif redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[2]) then out[i] = -2
  else
    redis.call('SADD', KEYS[1], id)
    redis.call('SADD', users, id)
    redis.call('HSET', run, unpack(ARGV, a + 2, a + 1 + n))
    redis.call('EXPIRE', run, tonumber(ARGV[3]))
    out[i] = 1
  end
  a = a + 2 + n
end
return out
"""
# ENQUEUE_MANY: KEYS queue, the last wake-up's key, then job key and result key per job; ARGV
# TTL ms, the control channel, the wake-up message, ms between wake-ups, then job, score and
# id per job. 1 queued, 0 queued already, per job; one wake-up for all.
ENQUEUE_MANY = """
local out, queued = {}, false
for i = 1, (#KEYS - 2) / 2 do
  local a = 4 + 3 * (i - 1)
  if redis.call('EXISTS', KEYS[2 * i + 1], KEYS[2 * i + 2]) > 0 then out[i] = 0
  else
    redis.call('SET', KEYS[2 * i + 1], ARGV[a + 1], 'PX', tonumber(ARGV[1]))
    redis.call('ZADD', KEYS[1], tonumber(ARGV[a + 2]), ARGV[a + 3])
    out[i], queued = 1, true
  end
end
if queued and redis.call('SET', KEYS[2], '1', 'PX', tonumber(ARGV[4]), 'NX') then
  redis.call('PUBLISH', ARGV[2], ARGV[3])
end
return out
"""
# Move a run from one status to another only if it is in one of the expected ones.
MOVE = """
local now = redis.call('HGET', KEYS[1], 'status')
if not now then return false end
for s in string.gmatch(ARGV[1], '[^,]+') do
  if s == now then
    for i = 2, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
    return now
  end
end
return false
"""
# An answer is taken once: whoever removes the wait delivers it; a second answer finds none.
ANSWER = """
if redis.call('HDEL', KEYS[1], ARGV[1]) == 1 then
  redis.call('PUBLISH', ARGV[2], ARGV[3])
  return 1
end
return 0
"""
# A run's end: its row, the ``end`` entry numbered after the stream's last (in the run's
# stream and the fleet's news), its slots freed, its keys kept keep_s. From KEYS[k]: run, ev,
# active, active:user, wait, abort, news; from ARGV[a]: status, finished_at, view, keep_s, run
# id, the news' length. Ended by the worker that ran it (``ran``), also its count on that
# worker and its arq job, as arq's finish_job would (two round trips more): KEYS[k + 7] on
# running, the job's in-progress, retry and job keys, arq's queue and abort set; ARGV[a + 6]
# on the worker, the job id. Returns the end's number. Once only: a run whose stream ends
# already (a write tried again after its reply was lost) keeps its one end, and the worker's
# count goes down only with the end this call writes.
_END = """
local function finish(k, a, ran)
  local run, ev, id = KEYS[k], KEYS[k + 1], ARGV[a + 4]
  local last = redis.call('XREVRANGE', ev, '+', '-', 'COUNT', 1)
  local n = 0
  if #last > 0 then n = tonumber(string.match(last[1][1], '%-(%d+)$')) end
  local fresh = #last == 0 or last[1][2][1] ~= 'end'
  if fresh then
    n = n + 1
    redis.call('HSET', run, 'status', ARGV[a], 'finished_at', ARGV[a + 1], 'view', ARGV[a + 2])
    redis.call('XADD', ev, '0-' .. n, 'end', ARGV[a])
    redis.call('XADD', KEYS[k + 6], 'MAXLEN', '~', ARGV[a + 5], '*', id .. ' ' .. n,
               'end:' .. ARGV[a])
    redis.call('SREM', KEYS[k + 2], id)
    redis.call('SREM', KEYS[k + 3], id)
    redis.call('EXPIRE', run, tonumber(ARGV[a + 3]))
    redis.call('EXPIRE', ev, tonumber(ARGV[a + 3]))
    redis.call('DEL', KEYS[k + 4], KEYS[k + 5])
  end
  if ran then
    if fresh then redis.call('HINCRBY', KEYS[k + 7], ARGV[a + 6], -1) end
    redis.call('DEL', KEYS[k + 8], KEYS[k + 9], KEYS[k + 10])
    redis.call('ZREM', KEYS[k + 11], ARGV[a + 7])
    redis.call('ZREM', KEYS[k + 12], ARGV[a + 7])
  end
  return n
end
"""
# One run's end in one round trip (the keys and arguments of ``finish`` above, from the
# first; 13 keys: ended where it ran).
FINISH = _END + "return finish(1, 1, #KEYS > 7)\n"
# Events of many runs: each into its run's stream as entry 0-N (a number taken already, by a
# second writer, is refused there and left out of the rest), then those taken into the
# fleet's news, one entry per 1000 events, a field "run N" per event. The news carries the
# events themselves: a gateway reads that one stream, not one per run it follows. KEYS[1] the
# news, the runs' streams from KEYS[k], ``count`` of them; ARGV[1] the news' length, from
# ARGV[a] per run: its id, first number, its events joined by newlines (one argument a run,
# not one an event: packing each was most of a batch's cost to its worker; an event's JSON
# holds no raw newline).
_APPEND = """
local function append(k, count, a)
  local out = {}
  for i = k, k + count - 1 do
    local run, seq, blob = ARGV[a], tonumber(ARGV[a + 1]), ARGV[a + 2]
    a = a + 3
    local pos = 1
    while true do
      local nl = string.find(blob, '\\n', pos, true)
      local ev = string.sub(blob, pos, nl and nl - 1 or -1)
      local r = redis.pcall('XADD', KEYS[i], '0-' .. seq, 'e', ev)
      if type(r) ~= 'table' or not r.err then
        out[#out + 1] = run .. ' ' .. seq
        out[#out + 1] = ev
        if #out >= 2000 then
          redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', unpack(out))
          out = {}
        end
      end
      if not nl then break end
      seq, pos = seq + 1, nl + 1
    end
  end
  if #out > 0 then redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', unpack(out)) end
end
"""
APPEND = _APPEND + "append(2, #KEYS - 1, 2)\nreturn 1\n"
# A worker's write (its outbox): the events of many runs (as APPEND), then the ends of runs
# (as FINISH), each after its run's events, in one round trip: a run's end went in a round
# trip of its own after its last events' write. KEYS[1] the news, then the runs' streams,
# then each end's keys (7, or 13 ended where it ran); ARGV[1] the news' length, ARGV[2] how
# many runs have events, then per run its 3 arguments, then per end its key count and its
# arguments (6, or 8). Returns the ends' numbers.
WRITE = _APPEND + _END + """
local runs = tonumber(ARGV[2])
append(2, runs, 3)
local k, a, out = 2 + runs, 3 + 3 * runs, {}
while a <= #ARGV do
  local keys = tonumber(ARGV[a])
  out[#out + 1] = finish(k, a + 1, keys > 7)
  k, a = k + keys, a + 1 + (keys > 7 and 8 or 6)
end
return out
"""
# A worker takes runs in one round trip (a run was five: the row, its lease, the move to
# running, the worker's count, the abort flag and last event number; then a round trip
# each, now one for the runs that start together). KEYS running, then per run: run, ev,
# abort, the arq job's in-progress key (the lease); ARGV max deaths, lease ms, the worker,
# then per run: the job's try, "1" if the store holds an abort request. Returns per run
# {what, the row as it was, aborted, last event number}: what is gone (no row, or ended),
# lost (another holds the lease), dying (too many deaths: not moved), abort (aborted while
# queued: now cancelling), moved (in another status) or take (now running here).
TAKE = """
local function take(run, ev, abort, lease, try, asked)
  local h = redis.call('HGETALL', run)
  local row = {}
  for i = 1, #h, 2 do row[h[i]] = h[i + 1] end
  if #h == 0 or (row['finished_at'] or '') ~= '' then return {'gone', h} end
  if redis.call('PEXPIRE', lease, ARGV[2]) == 0 then
    if not redis.call('SET', lease, '1', 'PX', ARGV[2], 'NX') then return {'lost', h} end
  end
  local deaths = tonumber(try) - 1 - tonumber(row['handbacks'] or '0')
  if deaths >= tonumber(ARGV[1]) then return {'dying', h} end
  local status = row['status']
  if status == 'queued' and asked == '1' then
    redis.call('HSET', run, 'status', 'cancelling')
    return {'abort', h}
  end
  if status ~= 'queued' and status ~= 'running' then return {'moved', h} end
  redis.call('HSET', run, 'status', 'running', 'worker', ARGV[3])
  redis.call('HINCRBY', KEYS[1], ARGV[3], 1)
  local last = redis.call('XREVRANGE', ev, '+', '-', 'COUNT', 1)
  local n = 0
  if #last > 0 then n = tonumber(string.match(last[1][1], '%-(%d+)$')) end
  return {'take', h, redis.call('EXISTS', abort), n}
end
local out = {}
for i = 0, (#KEYS - 1) / 4 - 1 do
  local k, a = 1 + 4 * i, 3 + 2 * i
  out[i + 1] = take(KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4], ARGV[a + 1],
                    ARGV[a + 2])
end
return out
"""
