import os

from django.core.wsgi import get_wsgi_application

from memoryadmin import collector
from memoryadmin.checks import require_secrets

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryadmin.settings")
application = get_wsgi_application()

# gunicorn runs no system checks: refuse to serve without the production secrets.
require_secrets()

# Everything loaded so far (Django, the app, their imports: about half a million
# objects) lives as long as the process. Out of the collector's reach, a full
# collection no longer walks it: that walk was a pause of about 300 ms every
# round or two of a large principal's first retrieval, most of its p95
# (docs/performance.md). With gunicorn's --preload it also keeps forked workers
# from copying those pages when the collector would have touched them, and
# they inherit the youngest generation's larger threshold (collector.py).
collector.settle()
