from .cache import getUserDataCache


def getUserData(user_id):
    """Return the user record for user_id."""
    cached = getUserDataCache.get(user_id)
    if cached is not None:
        return cached
    record = {"id": user_id, "name": f"user{user_id}"}
    getUserDataCache[user_id] = record
    return record


def prefetch_getUserData(ids):
    return [getUserData(i) for i in ids]
