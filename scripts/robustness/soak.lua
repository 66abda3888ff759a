-- Mixed requests for scripts/robustness/soak.sh: static, cached, echo GET and POST, 404, and a bad
-- request (a header with a space before the colon: 400, then the server closes).
local reqs = {}
local n = 0
function init(args)
  local host = "Host: soak\r\n"
  reqs = {
    "GET /index.html HTTP/1.1\r\n" .. host .. "\r\n",
    "GET /haewelmann.html HTTP/1.1\r\n" .. host .. "\r\n",
    "GET /haewelmann.html HTTP/1.1\r\n" .. host .. "Range: bytes=100-199\r\n\r\n",
    "GET /echo HTTP/1.1\r\n" .. host .. "\r\n",
    "POST /echo HTTP/1.1\r\n" .. host .. "Content-Length: 11\r\n\r\nhello world",
    "GET /no/such/file HTTP/1.1\r\n" .. host .. "\r\n",
    "GET /files/1k.bin HTTP/1.1\r\n" .. host .. "\r\n",
    "GET /index.html HTTP/1.1\r\n" .. host .. "If-None-Match: \"x\"\r\n\r\n",
  }
end
function request()
  n = n + 1
  -- One request in 50 is malformed.
  if n % 50 == 0 then
    return "GET /bad HTTP/1.1\r\nHost : soak\r\n\r\n"
  end
  return reqs[(n % #reqs) + 1]
end
