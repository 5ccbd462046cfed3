from csp.constants import NONCE
from csp.decorators import csp_update
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

# The API docs page only: Swagger UI keeps a nonced <style> block and draws its
# icons from data: URIs. Its script comes from a separate request (split view),
# so scripts stay files from this site like everywhere else.
api_docs = csp_update({"style-src": [NONCE], "img-src": ["data:"]})(
    SpectacularSwaggerSplitView.as_view(url_name="api-schema")
)

urlpatterns = [
    path("admin/", admin.site.urls),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", api_docs, name="api-docs"),
    path("api/v1/", include("governance.api.urls")),
    path("", include("governance.urls")),
]

# JSON errors on API paths, Django's pages elsewhere (governance.api.errors).
handler400 = "governance.api.errors.bad_request"
handler404 = "governance.api.errors.page_not_found"
handler500 = "governance.api.errors.server_error"
