"""Raw TCP echo on Python's asyncio (the peer for tcp-echo): --port N,
prints "listening on PORT"."""
import asyncio
import sys


class Echo(asyncio.Protocol):
    def connection_made(self, transport):
        self.t = transport

    def data_received(self, data):
        self.t.write(data)

    def eof_received(self):
        self.t.write_eof()


async def main():
    port = int(sys.argv[sys.argv.index("--port") + 1]) if "--port" in sys.argv else 0
    srv = await asyncio.get_running_loop().create_server(Echo, "0.0.0.0", port)
    print("listening on %d" % srv.sockets[0].getsockname()[1], flush=True)
    await srv.serve_forever()

asyncio.run(main())
