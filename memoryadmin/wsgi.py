import os

from django.core.wsgi import get_wsgi_application

from memoryadmin.checks import require_secrets

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryadmin.settings")
application = get_wsgi_application()

# gunicorn runs no system checks: refuse to serve without the production secrets.
require_secrets()
