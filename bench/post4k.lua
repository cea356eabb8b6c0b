-- wrk script: POST /echo with a 4 KiB body (the echo servers send it back).
wrk.method = "POST"
wrk.path = "/echo"
wrk.body = string.rep("x", 4096)
wrk.headers["Content-Type"] = "application/octet-stream"
