"""Webhooks API (``/api/webhooks/``): register, list, delete, rotate secret, see deliveries.

Authenticated users only, and only their own webhooks: another user's webhook is a 404, as
if it did not exist. The secret is in the answers to creation and to ``rotate-secret`` only.
The signature scheme is described in :mod:`scoring.webhooks`.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import Http404
from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from benchmarks_app.models import Webhook, WebhookDelivery
from benchmarks_app.services import webhooks


class WebhookSerializer(serializers.ModelSerializer):
    deliveries = serializers.HyperlinkedIdentityField(view_name="api:webhook-deliveries")

    class Meta:
        model = Webhook
        fields = ["id", "url", "is_active", "created_at", "deliveries"]
        read_only_fields = fields


class WebhookWithSecretSerializer(WebhookSerializer):
    secret = serializers.CharField(
        read_only=True,
        help_text="HMAC-SHA256 key of X-Eval-Signature; shown only in this answer.",
    )

    class Meta(WebhookSerializer.Meta):
        fields = [*WebhookSerializer.Meta.fields, "secret"]
        read_only_fields = fields


class WebhookCreateSerializer(serializers.Serializer):
    url = serializers.CharField(
        max_length=500, help_text="http(s) URL that receives a signed POST when a run ends."
    )


class DeliverySerializer(serializers.ModelSerializer):
    run = serializers.PrimaryKeyRelatedField(read_only=True)  # type: ignore[var-annotated]

    class Meta:
        model = WebhookDelivery
        fields = [
            "id",
            "event",
            "run",
            "status",
            "attempts",
            "last_status_code",
            "last_error",
            "created_at",
            "next_attempt_at",
            "delivered_at",
            "payload",
        ]
        read_only_fields = fields


def _own(request: Request, pk: int) -> Webhook:
    webhook = webhooks.webhooks_of(request.user).filter(pk=pk).first()
    if webhook is None:
        raise Http404("No such webhook")
    return webhook


class WebhookListView(generics.ListAPIView):
    """GET: your webhooks. POST ``{"url": ...}``: a new one (its secret is in the answer)."""

    permission_classes = [IsAuthenticated]
    serializer_class = WebhookSerializer
    filter_backends: list[Any] = []

    def get_queryset(self) -> QuerySet[Webhook]:
        return webhooks.webhooks_of(self.request.user).order_by("-created_at", "-id")

    @extend_schema(request=WebhookCreateSerializer, responses={201: WebhookWithSecretSerializer})
    def post(self, request: Request) -> Response:
        serializer = WebhookCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            webhook = webhooks.webhook_create(
                owner=request.user, url=serializer.validated_data["url"]
            )
        except webhooks.WebhookError as exc:
            raise ValidationError({exc.field: [exc.message]}) from exc
        body = WebhookWithSecretSerializer(webhook, context={"request": request}).data
        return Response(body, status=status.HTTP_201_CREATED)


class WebhookDetailView(APIView):
    """GET: one of your webhooks. DELETE: remove it (and its deliveries)."""

    permission_classes = [IsAuthenticated]

    @extend_schema(responses=WebhookSerializer)
    def get(self, request: Request, pk: int) -> Response:
        return Response(WebhookSerializer(_own(request, pk), context={"request": request}).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, pk: int) -> Response:
        webhooks.webhook_delete(webhook=_own(request, pk))
        return Response(status=status.HTTP_204_NO_CONTENT)


class WebhookRotateSecretView(APIView):
    """A new secret for one of your webhooks; the old one stops working at once."""

    permission_classes = [IsAuthenticated]

    @extend_schema(request=None, responses=WebhookWithSecretSerializer)
    def post(self, request: Request, pk: int) -> Response:
        webhook = webhooks.webhook_rotate_secret(webhook=_own(request, pk))
        return Response(WebhookWithSecretSerializer(webhook, context={"request": request}).data)


class WebhookDeliveryListView(generics.ListAPIView):
    """The deliveries of one of your webhooks, newest first."""

    permission_classes = [IsAuthenticated]
    serializer_class = DeliverySerializer
    filter_backends: list[Any] = []

    def get_queryset(self) -> QuerySet[WebhookDelivery]:
        return webhooks.deliveries_of(_own(self.request, int(self.kwargs["pk"])))


urlpatterns = [
    path("", WebhookListView.as_view(), name="webhook-list"),
    path("<int:pk>/", WebhookDetailView.as_view(), name="webhook-detail"),
    path(
        "<int:pk>/rotate-secret/", WebhookRotateSecretView.as_view(), name="webhook-rotate-secret"
    ),
    path("<int:pk>/deliveries/", WebhookDeliveryListView.as_view(), name="webhook-deliveries"),
]
