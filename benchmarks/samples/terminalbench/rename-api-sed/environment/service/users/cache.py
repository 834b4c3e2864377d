getUserDataCache = {}
