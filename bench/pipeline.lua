-- wrk script: 16 GETs written back to back on each connection (HTTP/1.1
-- pipelining). wrk counts each of the 16 responses as one request.
local depth = 16

init = function(args)
   local r = {}
   for i = 1, depth do
      r[i] = wrk.format("GET", "/")
   end
   req = table.concat(r)
end

request = function()
   return req
end
