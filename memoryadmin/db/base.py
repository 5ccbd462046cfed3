"""Django's PostgreSQL backend, pointed at the embedded server on first connect.

Used only when ``DATABASE_URL`` is unset. Starting the server when a
connection is first needed (rather than when settings are imported) keeps
``manage.py check``, ruff and mypy from starting a database.

The server is set up like a production database (docs/operations.md,
"Database roles"): the application connects as a role that owns nothing,
migrations as the owner role (``memoryadmin.database_roles``), and only the
set-up here uses the superuser.
"""

from typing import Any

import psycopg
from django.db.backends.postgresql import base, creation
from psycopg import sql

from memoryadmin import embedded_db


class DatabaseCreation(creation.DatabaseCreation):
    """Test databases are made by the superuser, owned by the owner role, like the real one.

    The application role may not create databases, so Django's usual way
    (``CREATE DATABASE`` as the connecting user) is not open to it.
    """

    def _create_test_db(self, verbosity: int, autoclobber: bool, keepdb: bool = False) -> str:
        name = self._get_test_db_name()  # type: ignore[attr-defined]  # Django's, missing from the stubs
        host = embedded_db.socket_dir(embedded_db.ensure_server())
        if not keepdb:
            with psycopg.connect(host=host, user="postgres", dbname="postgres", autocommit=True) as conn:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        embedded_db.prepare_database(host, name)
        return name

    def _destroy_test_db(self, test_database_name: str, verbosity: int) -> None:
        self.connection.close_pool()
        host = embedded_db.socket_dir(embedded_db.ensure_server())
        with psycopg.connect(host=host, user="postgres", dbname="postgres", autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(test_database_name))
            )


class DatabaseWrapper(base.DatabaseWrapper):
    creation_class = DatabaseCreation

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
