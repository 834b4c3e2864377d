# Third-party code: do not edit.
def getUserData(session, uid):
    return session.get("http://internal.example.com/users/%d" % uid)
