"""The console's session page: rounds, writes, the summary with its R17 check, the resume hint.

Read-only, for every console role. Everything it shows about the
conversation (queries, statements, the summary, its source, the hint) is
attacker-controlled memory text: the template renders it escaped inside
``hx-disable`` containers (STYLE.md).
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from governance.selectors import sessions as selectors
from governance.views.base import console_view, get_scoped

TEMPLATE = "governance/sessions/detail.html"


@console_view()
def detail(request: HttpRequest, session_id: int) -> HttpResponse:
    # Scoped lookup: another project's session id answers 404, not 403 (R1).
    session = get_scoped(request, selectors.sessions_for_page(), pk=session_id)
    return render(request, TEMPLATE, {"page": selectors.session_page(session)})
