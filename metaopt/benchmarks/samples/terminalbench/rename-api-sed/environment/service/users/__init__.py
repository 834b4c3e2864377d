from .api import getUserData, prefetch_getUserData

__all__ = ["getUserData", "prefetch_getUserData"]
