"""A small byte-level BPE trainer whose result is a `tiktoken.Encoding` (no download, no rustbpe).

`train_encoding(text, vocab_size)` learns merges on `text` (GPT-4 split pattern, bytes first) and
returns an Encoding with one special token, `<|bos|>`, as the last id. Pure Python with
incremental pair counts: about a second per MB of training text for a few thousand merges.
`token_bytes(enc)` gives each id's byte length (0 for the special token), which the evaluator
needs to turn nats per token into bits per byte.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter, defaultdict

import regex
import tiktoken

SPLIT_PATTERN = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*"""
                 r"""|\s*[\r\n]|\s+(?!\S)|\s+""")
BOS = "<|bos|>"


def train_encoding(text: str, vocab_size: int, name: str = "metaopt-bpe") -> tiktoken.Encoding:
    """An Encoding with `vocab_size` ids: 256 bytes, learned merges, then `<|bos|>`. Deterministic
    for a given text (ties go to the smallest pair)."""
    if vocab_size < 258:
        raise ValueError("vocab_size must be at least 258 (256 bytes + 1 merge + <|bos|>)")
    counts = Counter(regex.findall(SPLIT_PATTERN, text))
    words = [list(w.encode("utf-8")) for w in counts]
    freqs = list(counts.values())
    vocab: list[bytes] = [bytes([i]) for i in range(256)]
    ids: dict[bytes, int] = {b: i for i, b in enumerate(vocab)}
    pairs: Counter = Counter()
    where: dict[tuple[int, int], set[int]] = defaultdict(set)
    for wi, w in enumerate(words):
        for p in itertools.pairwise(w):
            pairs[p] += freqs[wi]
            where[p].add(wi)
    heap = [(-c, p) for p, c in pairs.items()]
    heapq.heapify(heap)
    while len(vocab) < vocab_size - 1 and heap:
        neg, pair = heapq.heappop(heap)
        if pairs.get(pair, 0) != -neg or -neg <= 0:
            continue  # stale heap entry
        merged = vocab[pair[0]] + vocab[pair[1]]
        new = ids.get(merged)
        if new is None:
            new = len(vocab)
            vocab.append(merged)
            ids[merged] = new
        touched: Counter = Counter()
        for wi in list(where.pop(pair, ())):
            w, f = words[wi], freqs[wi]
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == pair[0] and w[i + 1] == pair[1]:
                    out.append(new)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            for p in itertools.pairwise(w):
                touched[p] -= f
            for p in itertools.pairwise(out):
                touched[p] += f
                where[p].add(wi)
            words[wi] = out
        for p, d in touched.items():
            if d:
                pairs[p] += d
                if pairs[p] > 0:
                    heapq.heappush(heap, (-pairs[p], p))
        pairs.pop(pair, None)
    ranks = {b: i for i, b in enumerate(vocab)}
    return tiktoken.Encoding(name=name, pat_str=SPLIT_PATTERN, mergeable_ranks=ranks,
                             special_tokens={BOS: len(vocab)})


def token_bytes(enc: tiktoken.Encoding) -> list[int]:
    """Byte length of every id; special tokens count 0 (they are not text)."""
    special = set(enc.special_tokens_set)
    out = []
    for i in range(enc.n_vocab):
        b = enc.decode_single_token_bytes(i)
        out.append(0 if b.decode("utf-8", "replace") in special else len(b))
    return out
