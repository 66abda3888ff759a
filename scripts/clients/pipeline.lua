-- wrk script: sends DEPTH requests per write (HTTP/1.1 pipelining), e.g.
--   wrk -t1 -c50 -d3s -s scripts/clients/pipeline.lua http://127.0.0.1:8080/echo -- 16
-- wrk counts every response, so requests/s is per request, not per batch.
init = function(args)
  local depth = tonumber(args[1]) or 16
  local r = {}
  for i = 1, depth do
    r[i] = wrk.format()
  end
  batch = table.concat(r)
end

request = function()
  return batch
end
