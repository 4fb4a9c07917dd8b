"""Server-rendered pages, one module per benchmark; each module defines ``urlpatterns``."""
