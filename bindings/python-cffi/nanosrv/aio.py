"""Running a Manager inside an asyncio event loop.

The loop watches the library's pollable descriptor (nsv_fd) and drains with
poll(0) until no events are left, one poll per loop callback: coroutines a
batch started run before the next poll, whose write then carries their
replies. A 100 ms tick drains as well, so the library's timers (timeouts,
keep-alive sweeps) run while the socket side is quiet. Handlers may be
coroutines: the reply is sent when they finish (a returned value becomes
the reply), and an exception gives a 500.

    async def main():
        srv = nanosrv.Manager()
        @srv.route("GET", "/slow")
        async def slow(conn, msg):
            await asyncio.sleep(0.1)
            return {"ok": True}
        srv.http_listen("http://127.0.0.1:8080")
        await nanosrv.aio.serve(srv)
"""
import asyncio

TICK_S = 0.1


class _Host:
    """asyncio state of one attached Manager."""

    def __init__(self, manager, loop):
        self.m = manager
        self.loop = loop
        self.fd = manager.fd()
        self.pending = False     # a drain is scheduled with call_soon
        self.done = loop.create_future()
        self.timer = None

    def drain(self):
        m = self.m
        self.pending = False
        # Replies made while handling the batch leave with the next poll,
        # which kick() below schedules; none needs asking for meanwhile.
        m._kick = None
        try:
            n = m.poll(0)
        except Exception as e:
            self.finish(e)
            return
        finally:
            m._kick = self.kick
        if n > 0:
            # More may be queued, and replies wait for the next poll. Polling
            # again after the loop's ready callbacks lets the coroutines this
            # batch started run first: their replies then leave together
            # with that poll, and an early answer (413 to Expect:
            # 100-continue) comes before the library's next turn.
            self.kick()
        elif n < 0:
            self.finish(None)

    def kick(self):
        # A reply outside a drain (a coroutine finished, a callback fired):
        # the library sends it on its next poll, so run one soon.
        if not self.pending:
            self.pending = True
            self.loop.call_soon(self.drain)

    def tick(self):
        self.drain()
        if not self.done.done():
            self.timer = self.loop.call_later(TICK_S, self.tick)

    def finish(self, exc):
        detach(self.m)
        if not self.done.done():
            if exc is None:
                self.done.set_result(None)
            else:
                self.done.set_exception(exc)


def attach(manager, loop=None):
    """Start serving `manager` from the running (or given) asyncio loop."""
    if manager._loop is not None:
        raise RuntimeError("this server is already attached to an event loop")
    loop = loop or asyncio.get_running_loop()
    host = _Host(manager, loop)
    manager._loop = loop
    manager._aio = host
    manager._kick = host.kick
    loop.add_reader(host.fd, host.drain)
    host.timer = loop.call_later(TICK_S, host.tick)
    loop.call_soon(host.drain)
    return host.done


def detach(manager):
    """Stop serving from asyncio; the Manager may be polled directly again."""
    host = getattr(manager, "_aio", None)
    if host is None:
        return
    manager._aio = None
    manager._loop = None
    manager._kick = None
    try:
        host.loop.remove_reader(host.fd)
    except Exception:
        pass  # the loop is closed already
    if host.timer is not None:
        host.timer.cancel()


async def serve(manager):
    """Serve until manager.stop() or the end of a drain."""
    done = attach(manager)
    try:
        await done
    finally:
        detach(manager)


def run(manager):
    """asyncio.run(serve(manager))."""
    asyncio.run(serve(manager))
