import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from users import getUserData, prefetch_getUserData  # noqa: E402

if __name__ == "__main__":
    print(getUserData(7)["name"])
    print(len(prefetch_getUserData([1, 2, 3])))
