#!/usr/bin/python3
"""Requests per second of the HTTP client (srv.fetch) and, for reference,
aiohttp's ClientSession (Debian's python3-aiohttp, if installed), both on
one asyncio loop against the same upstream: a nanosrv Manager in another
process answering GET /small with 13 bytes.

    NANOSRV_LIBRARY=$PWD/build/libnanosrv.so.1 /usr/bin/python3 bindings/python-cffi/bench/client.py [N] [CONC]

N requests (default 5000), CONC at a time (default 32); connections are
pooled by both clients. Prints one line per client: req/s, and the CPU
seconds the client process used per 1000 requests.
"""
import asyncio
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import nanosrv  # noqa: E402

UPSTREAM = """
import nanosrv
m = nanosrv.Manager()
m.get("/small", lambda conn, msg: "hello, world\\n")
print("listening on %d" % m.http_listen("http://127.0.0.1:0").port, flush=True)
m.run()
"""


async def run(fetch_one, n, conc):
    left = [n]

    async def worker():
        while left[0] > 0:
            left[0] -= 1
            await fetch_one()
    t0, c0 = time.perf_counter(), time.process_time()
    await asyncio.gather(*[worker() for _ in range(conc)])
    return n / (time.perf_counter() - t0), (time.process_time() - c0) * 1000 / n


async def bench_nanosrv(url, n, conc):
    srv = nanosrv.Manager()
    srv.set_option("http_conns_per_origin", min(conc, 256))
    done = nanosrv.aio.attach(srv)

    async def one():
        r = await srv.fetch(url)
        await r.read()
    await run(one, min(n, 500), conc)  # warm the pool
    out = await run(one, n, conc)
    srv.stop()
    await done
    srv.close()
    return out


async def bench_aiohttp(url, n, conc):
    import aiohttp
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=conc)) as s:
        async def one():
            async with s.get(url) as r:
                await r.read()
        await run(one, min(n, 500), conc)
        return await run(one, n, conc)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    conc = int(sys.argv[2]) if len(sys.argv) > 2 else 32
    up = subprocess.Popen([sys.executable, "-c", UPSTREAM], stdout=subprocess.PIPE,
                          env=dict(os.environ, PYTHONPATH=os.path.join(HERE, "..")))
    try:
        port = int(up.stdout.readline().split()[2])
        url = "http://127.0.0.1:%d/small" % port
        rps, cpu = asyncio.run(bench_nanosrv(url, n, conc))
        print("nanosrv fetch      %8.0f req/s  %6.3f CPU s per 1000 requests" % (rps, cpu))
        try:
            import aiohttp  # noqa: F401
        except ImportError:
            print("aiohttp            (python3-aiohttp not installed)")
        else:
            rps, cpu = asyncio.run(bench_aiohttp(url, n, conc))
            print("aiohttp session    %8.0f req/s  %6.3f CPU s per 1000 requests" % (rps, cpu))
    finally:
        up.kill()
        up.wait()


if __name__ == "__main__":
    main()
