"""Synthetic prompt and response texts (simulate --texts / --echo-rate), for the content evidence of
issue #33 (forensics.ingest.content, findings/queries/content_matches/).

Words come from a Zipf vocabulary (VOCAB made-up words, rank r drawn with weight 1 / r^ZIPF_S). Each
request gets a system prompt (one of cfg.n_system_prompts texts, shared by every request that uses that
system prompt: the boilerplate the content match must discount), a short user prompt of its own and, when
it was served, a short response: the text need not be as long as the token counts.

Echoes: a response decoded over another request's KV tends to echo it. For every true exposure pair
(recipient, source) of the simulator (truth/exposures.csv, any node, any kind), with probability
echo_rate the recipient's response carries one echoed span: ECHO_MIN to ECHO_MAX consecutive words of the
source's user prompt (or, with probability ECHO_FROM_OUTPUT, of the source's own response as first
drawn), each word replaced by a random vocabulary word with probability echo_noise, inserted at a random
word boundary of the response. truth/echoes.csv lists the pairs that got one.

Every draw is from an RNG of its own (seeded by the seed), so the traffic, the engines and every other
file are the same with texts as without.
"""

from __future__ import annotations

import bisect
import itertools
import random
from dataclasses import dataclass

from forensics.simulate.config import SimConfig
from forensics.simulate.request import Request

VOCAB = 6000
ZIPF_S = 1.05
SYSTEM_WORDS = (30, 60)
USER_WORDS = (25, 50)
RESPONSE_WORDS = (20, 45)
ECHO_MIN, ECHO_MAX = 12, 24
ECHO_FROM_OUTPUT = 0.3
_SYL = ("ka", "lo", "mi", "ren", "tu", "sa", "vel", "dor", "qi", "ne", "bra", "to", "fi", "gar", "shu", "el")


@dataclass(frozen=True)
class Text:
    system: str
    user: str
    response: str  # "" when the request was not served


class Vocabulary:
    def __init__(self) -> None:
        words = ("".join(p) for n in (2, 3, 4) for p in itertools.product(_SYL, repeat=n))
        self.words = list(itertools.islice(words, VOCAB))
        acc, total = [], 0.0
        for r in range(1, VOCAB + 1):
            total += 1.0 / r**ZIPF_S
            acc.append(total)
        self.cum, self.total = acc, total

    def draw(self, rng: random.Random, n: int) -> list[str]:
        return [self.words[min(bisect.bisect(self.cum, rng.random() * self.total), VOCAB - 1)] for _ in range(n)]


def _sentence_case(ws: list[str]) -> str:
    return " ".join(ws).capitalize() + "."


def make_texts(
    cfg: SimConfig, reqs: list[Request], pairs: list[tuple[int, int]]
) -> tuple[dict[int, Text], list[tuple[int, int, int]]]:
    """idx -> Text, and the echoes made: (recipient idx, source idx, echoed 0/1) for every true pair."""
    vocab = Vocabulary()
    rng = random.Random(f"texts:{cfg.seed}")
    system = {i: vocab.draw(rng, rng.randint(*SYSTEM_WORDS)) for i in range(max(cfg.n_system_prompts, 1) + 1)}
    user: dict[int, list[str]] = {}
    response: dict[int, list[str]] = {}
    for r in sorted(reqs, key=lambda x: x.idx):
        user[r.idx] = vocab.draw(rng, rng.randint(*USER_WORDS))
        response[r.idx] = vocab.draw(rng, rng.randint(*RESPONSE_WORDS)) if 200 <= r.status < 300 else []
    echo = random.Random(f"echo:{cfg.seed}")
    rate, noise = cfg.echo_rate or 0.0, cfg.echo_noise
    inserted: dict[int, list[list[str]]] = {}
    made = []
    for rec, src in sorted(set(pairs)):
        hit = bool(response.get(rec)) and echo.random() < rate
        made.append((rec, src, int(hit)))
        if not hit:
            continue
        base = response[src] if response.get(src) and echo.random() < ECHO_FROM_OUTPUT else user[src]
        n = min(echo.randint(ECHO_MIN, ECHO_MAX), len(base))
        at = echo.randint(0, len(base) - n)
        span = [w if echo.random() >= noise else vocab.draw(echo, 1)[0] for w in base[at : at + n]]
        inserted.setdefault(rec, []).append(span)
    out = {}
    for r in reqs:
        words = list(response[r.idx])
        for span in inserted.get(r.idx, []):
            k = echo.randint(0, len(words))
            words[k:k] = span
        sp = system[r.sp_id % len(system)]
        out[r.idx] = Text(_sentence_case(sp), _sentence_case(user[r.idx]), _sentence_case(words) if words else "")
    return out, made
