"""Django's PostgreSQL backend, pointed at the embedded server on first connect.

Used only when ``DATABASE_URL`` is unset. Starting the server when a
connection is first needed (rather than when settings are imported) keeps
``manage.py check``, ruff and mypy from starting a database.
"""

from typing import Any

from django.db.backends.postgresql import base

from memoryadmin import embedded_db


class DatabaseWrapper(base.DatabaseWrapper):
    def get_connection_params(self) -> dict[str, Any]:
        server = embedded_db.ensure_server()
        host = embedded_db.socket_dir(server)
        self.settings_dict["HOST"] = host
        # The test runner connects to the maintenance database to create the
        # test database; only the real application database is created here.
        name = self.settings_dict["NAME"]
        if name and not name.startswith("test_") and name != "postgres":
            embedded_db.ensure_database(server, name)
        params = super().get_connection_params()
        params["host"] = host
        return params
