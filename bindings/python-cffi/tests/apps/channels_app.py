"""django-channels: a ProtocolTypeRouter with a WebSocket echo consumer at
/ws/echo/ and the Django ASGI app (django_common.py) for http.

    python3 -m uvicorn channels_app:app       python3 -m nanosrv channels_app:app
"""
import os

os.environ.setdefault("NSV_DJANGO_CHANNELS", "1")
import django_common  # noqa: E402,F401  (configures Django first)
from channels.generic.websocket import AsyncWebsocketConsumer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402
from django.urls import path  # noqa: E402


class Echo(AsyncWebsocketConsumer):
    """Echo; "close CODE" closes with that code; path kwargs come back first."""

    async def connect(self):
        await self.accept()
        await self.send(text_data="hello " + self.scope["url_route"]["kwargs"].get("room", "-"))

    async def receive(self, text_data=None, bytes_data=None):
        if text_data is not None and text_data.startswith("close "):
            await self.close(code=int(text_data.split()[1]))
        elif text_data is not None:
            await self.send(text_data=text_data)
        else:
            await self.send(bytes_data=bytes_data)


class Deny(AsyncWebsocketConsumer):
    async def connect(self):
        await self.close()


application = ProtocolTypeRouter({
    "http": get_asgi_application(),
    "websocket": URLRouter([
        path("ws/echo/", Echo.as_asgi()),
        path("ws/room/<str:room>/", Echo.as_asgi()),
        path("ws/deny/", Deny.as_asgi()),
    ]),
})
app = application
