"""Django (settings in django_common.py) through its WSGI handler.

    gunicorn django_wsgi_app:app        python3 -m nanosrv django_wsgi_app:app --interface wsgi
"""
import django_common  # noqa: F401  (configures Django first)
from django.core.wsgi import get_wsgi_application

application = get_wsgi_application()
app = application
