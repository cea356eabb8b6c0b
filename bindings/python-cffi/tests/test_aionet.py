#!/usr/bin/python3
"""asyncio Protocol code on nanosrv.aionet: an echo Protocol as asyncio
users write it, 8 MiB of random bytes, half-close, pause_reading /
resume_reading, pause_writing / resume_writing with the write buffer
limits, create_connection to a stdlib asyncio server, streams."""
import asyncio
import os
import unittest

import _tap

from nanosrv import aionet


class EchoProtocol(asyncio.Protocol):
    """Plain asyncio code: nothing nanosrv-specific."""

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.transport.write(data)

    def eof_received(self):
        self.transport.write_eof()  # echo the half-close once all is sent
        return True


async def roundtrip(port, data):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)

    async def send():
        writer.write(data)
        await writer.drain()
        writer.write_eof()
    task = asyncio.ensure_future(send())
    got = await asyncio.wait_for(reader.read(), 60)  # until EOF
    await task
    writer.close()
    return got


class Aionet(unittest.TestCase):
    def test_echo_protocol_8mib_half_close(self):
        async def main():
            server = await aionet.create_server(EchoProtocol, "127.0.0.1", 0)
            data = os.urandom(8 << 20)
            got = await roundtrip(server.port, data)
            several = await asyncio.gather(*[roundtrip(server.port, os.urandom(100000 + i)) for i in range(4)])
            server.close()
            await server.wait_closed()
            return data, got, several
        data, got, several = asyncio.run(main())
        self.assertEqual(len(got), len(data))
        self.assertEqual(got, data)
        self.assertEqual([len(x) for x in several], [100000 + i for i in range(4)])

    def test_pause_reading_and_writing(self):
        log = []

        class Slow(asyncio.Protocol):
            def connection_made(self, transport):
                self.t = transport
                transport.set_write_buffer_limits(high=32768, low=8192)
                log.append(("limits", transport.get_write_buffer_limits()))

            def data_received(self, data):
                log.append(("data", data))
                if data == b"pause":
                    self.t.pause_reading()
                    log.append(("reading", self.t.is_reading()))
                    # 4 MiB at once: more than the client reads right away.
                    self.t.write(b"z" * (4 << 20))
                    log.append(("buffered", self.t.get_write_buffer_size() > 32768))

            def pause_writing(self):
                log.append("pause_writing")
                asyncio.get_running_loop().call_soon(self.t.resume_reading)

            def resume_writing(self):
                log.append("resume_writing")

            def connection_lost(self, exc):
                log.append(("lost", exc))

        async def main():
            server = await aionet.create_server(Slow, "127.0.0.1", 0)
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(b"pause")
            await writer.drain()
            await asyncio.sleep(0)
            n = 0
            while n < 4 << 20:
                b = await asyncio.wait_for(reader.read(1 << 20), 30)
                if not b:
                    break
                n += len(b)
            writer.write(b"after")  # read once reading resumed
            await writer.drain()
            for _ in range(200):
                if ("data", b"after") in log:
                    break
                await asyncio.sleep(0.01)
            writer.close()
            for _ in range(200):
                if log and log[-1][0] == "lost":
                    break
                await asyncio.sleep(0.01)
            server.close()
            return n
        n = asyncio.run(main())
        self.assertEqual(n, 4 << 20)
        self.assertEqual(log[0], ("limits", (8192, 32768)))
        self.assertIn(("reading", False), log)
        self.assertIn(("buffered", True), log)
        self.assertIn("pause_writing", log)
        self.assertIn("resume_writing", log)
        self.assertLess(log.index("pause_writing"), log.index("resume_writing"))
        self.assertIn(("data", b"after"), log)
        self.assertEqual(log[-1], ("lost", None))

    def test_create_connection_and_refused(self):
        got = []
        state = {}

        class Client(asyncio.Protocol):
            def connection_made(self, transport):
                transport.write(b"hello")
                transport.write_eof()

            def data_received(self, data):
                got.append(data)

            def connection_lost(self, exc):
                got.append(("lost", exc))
                state["done"].set_result(None)

        async def handle(reader, writer):
            data = await reader.read()
            writer.write(data[::-1])
            await writer.drain()
            writer.close()

        async def main():
            stdlib = await asyncio.start_server(handle, "127.0.0.1", 0)
            port = stdlib.sockets[0].getsockname()[1]
            state["done"] = asyncio.get_running_loop().create_future()
            t, p = await aionet.create_connection(Client, "127.0.0.1", port)
            self.assertIsInstance(p, Client)
            await asyncio.wait_for(state["done"], 20)
            stdlib.close()
            await stdlib.wait_closed()
            with self.assertRaises(ConnectionError):
                await aionet.create_connection(asyncio.Protocol, "127.0.0.1", port)
            r, w = await aionet.open_connection("127.0.0.1", (await echo_port()))
            w.write(b"stream line\n")
            line = await asyncio.wait_for(r.readline(), 20)
            w.close()
            return line

        async def echo_port():
            s = await aionet.create_server(EchoProtocol, "127.0.0.1", 0)
            return s.port
        line = asyncio.run(main())
        self.assertEqual(b"".join(x for x in got if isinstance(x, bytes)), b"olleh")
        self.assertEqual(got[-1], ("lost", None))
        self.assertEqual(line, b"stream line\n")


if __name__ == "__main__":
    _tap.main()
