from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/v1/", include("governance.api.urls")),
    path("", include("governance.urls")),
]

# JSON errors on API paths, Django's pages elsewhere (governance.api.errors).
handler400 = "governance.api.errors.bad_request"
handler404 = "governance.api.errors.page_not_found"
handler500 = "governance.api.errors.server_error"
