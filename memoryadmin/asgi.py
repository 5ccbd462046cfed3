import os

from django.core.asgi import get_asgi_application

from memoryadmin.checks import require_secrets

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryadmin.settings")
application = get_asgi_application()

# gunicorn runs no system checks: refuse to serve without the production secrets.
require_secrets()
