"""``/api/schema/`` served from a per-process cache (apart from :mod:`.schema`, which
drf-spectacular's views import through DRF's settings: importing them there is a cycle)."""

from __future__ import annotations

from typing import Any

from django.core.cache import caches
from django.http import HttpResponse
from django.utils import translation
from drf_spectacular.settings import spectacular_settings
from drf_spectacular.views import SpectacularAPIView


class CachedSchemaView(SpectacularAPIView):
    """``/api/schema/``, generated once per process and kept rendered (0.15-0.22 s of CPU a
    request before): the schema is a function of the code, so a deploy (a new process) is
    the only thing that changes it. Kept in the process's own ``local`` cache (bounded, so
    arbitrary ``?version=`` or ``?lang=`` values cannot grow it), not the shared one: every
    process of one deploy builds the same schema, and a shared entry would outlive a deploy.
    A schema that depends on the user (drf-spectacular's SERVE_PUBLIC off) is never cached.
    """

    def _get_schema_response(self, request: Any) -> Any:
        if not self.serve_public:
            return super()._get_schema_response(request)
        version = self.api_version or request.version or self._get_version_parameter(request)
        renderer = request.accepted_renderer
        key = "openapi-schema:" + "|".join(
            str(part)
            for part in (
                spectacular_settings.VERSION,
                version,
                translation.get_language(),
                request.accepted_media_type,
            )
        )
        local = caches["local"]
        cached = local.get(key)
        if cached is None:
            response = super()._get_schema_response(request)
            body = renderer.render(
                response.data, request.accepted_media_type, self.get_renderer_context()
            )
            content_type = (
                f"{renderer.media_type}; charset={renderer.charset}"
                if renderer.charset
                else renderer.media_type
            )
            cached = (body, content_type, response["Content-Disposition"])
            local.set(key, cached, None)
        body, content_type, disposition = cached
        answer = HttpResponse(body, content_type=content_type)
        answer["Content-Disposition"] = disposition
        return answer
