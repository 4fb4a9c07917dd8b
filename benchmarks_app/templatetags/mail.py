"""Where the site's e-mail goes, for pages that tell people to look for a message."""

from __future__ import annotations

from django import template
from django.conf import settings

register = template.Library()

# Backends that never reach a mailbox: the message is printed (console) or kept in memory
# (locmem, tests), so "check your spam folder" would send people looking in the wrong place.
NOT_DELIVERED = {
    "django.core.mail.backends.console.EmailBackend": "console",
    "django.core.mail.backends.filebased.EmailBackend": "file",
    "django.core.mail.backends.locmem.EmailBackend": "memory",
    "django.core.mail.backends.dummy.EmailBackend": "nowhere",
}


@register.simple_tag
def mail_not_delivered() -> str:
    """'' where mail is sent to mailboxes; else where it goes instead (``console``, ``file``...)."""
    return NOT_DELIVERED.get(str(settings.EMAIL_BACKEND), "")
