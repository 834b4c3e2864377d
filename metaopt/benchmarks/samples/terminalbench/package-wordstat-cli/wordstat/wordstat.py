"""wordstat: word statistics for text files."""
import argparse
import re
import sys
from collections import Counter

__version__ = "0.3.0"

WORD_RE = re.compile(r"[a-z']+")


def count_words(text):
    """Map each lower-cased word of `text` to the number of times it occurs."""
    return Counter(WORD_RE.findall(text.lower()))


def top_words(text, n=3):
    """The `n` most frequent words as (word, count) pairs; ties broken alphabetically."""
    counts = count_words(text)
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:n]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="wordstat", description="Print the most frequent words of a file.")
    parser.add_argument("file", help="text file to read ('-' for standard input)")
    parser.add_argument("-n", "--top", type=int, default=3, help="how many words to print")
    parser.add_argument("--version", action="version", version=f"wordstat {__version__}")
    args = parser.parse_args(argv)
    if args.file == "-":
        text = sys.stdin.read()
    else:
        with open(args.file, encoding="utf-8") as fh:
            text = fh.read()
    for word, count in top_words(text, args.top):
        print(f"{count:>5} {word}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
