"""Teacher side: OpenAI-compatible client pool, durable request cache, message conversion, judges."""

from vrag_data.teacher.cache import CachedResponse, RequestCache
from vrag_data.teacher.pool import ChatResult, TeacherError, TeacherPool, resolve_roles

__all__ = ["CachedResponse", "ChatResult", "RequestCache", "TeacherError", "TeacherPool", "resolve_roles"]
