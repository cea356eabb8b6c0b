"""Django (settings in django_common.py) through its ASGI handler.

    python3 -m uvicorn django_asgi_app:app    python3 -m nanosrv django_asgi_app:app
"""
import django_common  # noqa: F401  (configures Django first)
from django.core.asgi import get_asgi_application

application = get_asgi_application()
app = application
